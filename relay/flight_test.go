package relay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/execstore/execstore"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stepKind is a kind over items named "execution/name" (a timer when name starts with "t@",
// due at the second that follows). Only what a flight calls is defined.
type stepKind struct{ kind[string, string] }

func (stepKind) key(item string) string    { return item }
func (stepKind) lane(item string) string   { return strings.Split(item, "/")[0] }
func (stepKind) source(item string) string { return strings.Split(item, "/")[0] }
func (stepKind) dueAt(item string) time.Time {
	if _, name, _ := strings.Cut(item, "/"); strings.HasPrefix(name, "t@") {
		return stepT0.Add(time.Second)
	}
	return time.Time{}
}

var stepT0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// checkFlight asserts what always holds of a flight (see its type): the counts are its
// entries' states, overall and by hold, and each container holds the entries of its state.
func checkFlight(t *testing.T, f *flight[string, string], holds []*hold, msg string) {
	t.Helper()
	var count [states]int
	byHold := map[*hold]int{}
	byLane := map[string]int{}
	timed, n := 0, 0
	for k, e := range f.items {
		require.Equal(t, k, e.key, msg)
		require.NotEqual(t, out, e.state, msg)
		count[e.state]++
		byHold[e.hold]++
		if e.state == failing {
			byLane[e.lane]++
		}
		if isTimed(e.state) {
			require.Contains(t, f.timed[e.lane], e, msg)
			timed++
		}
	}
	for lk, es := range f.timed {
		require.NotEmpty(t, es, msg)
		for e := range es {
			require.Equal(t, lk, e.lane, msg)
		}
		n += len(es)
	}
	require.Equal(t, timed, n, msg) // with the entries found above: timed holds those alone
	require.Equal(t, count, f.count, msg)
	require.Equal(t, int64(len(f.items)), f.stats.inFlight.Load(), msg)
	for _, h := range holds {
		require.Equal(t, byHold[h], h.inFlight, msg)
	}
	require.Equal(t, byLane, f.failing, msg)
	in := func(list []*entry[string, string], s itemState) int {
		n := 0
		for _, e := range list {
			if e.state == s {
				n++
			}
		}
		return n
	}
	require.Equal(t, count[waiting], in(f.soon, waiting), msg)
	q := 0
	for _, l := range f.queues {
		q += in(l, queued)
	}
	require.Equal(t, count[queued], q, msg)
	require.LessOrEqual(t, in(f.settleQ, acking)+in(f.settleQ, failing), f.settling(), msg)
}

// The flight's transitions and its one hand-out rule, step by step. After every step, what
// always holds of a flight is checked (checkFlight).
func TestFlight(t *testing.T) {
	type step struct {
		// "scan", "commit": begin an epoch (the last one is the one decide? asks of);
		// "finish": finish the last epoch begun; "take", "pop" (the item's lane's first),
		// "handled" (acking), "failed" (failing), "ack", "bury", "release", "cancel", "fire"
		// (the timers due at stepT0+1s), "retry" (the item's execution waits for a retry):
		// transitions; "decide?": the verdict; "state?": the item's state.
		op    string
		item  string
		want  verdict
		state itemState
	}
	for _, c := range []struct {
		name  string
		steps []step
	}{
		{"in flight is never handed out again", []step{
			{op: "scan"}, {op: "take", item: "a/1"}, {op: "finish"},
			{op: "scan"}, {op: "decide?", item: "a/1", want: skip}, {op: "decide?", item: "b/1", want: hand},
		}},
		{"acked during the scan is skipped by it", []step{
			{op: "scan"}, {op: "take", item: "a/1"}, {op: "finish"},
			{op: "scan"}, {op: "pop", item: "a/1"}, {op: "handled", item: "a/1"}, {op: "ack", item: "a/1"},
			{op: "decide?", item: "a/1", want: skip},
		}},
		{"acked before the scan began is handed out (the store no longer returns it)", []step{
			{op: "scan"}, {op: "take", item: "a/1"}, {op: "finish"}, {op: "ack", item: "a/1"},
			{op: "scan"}, {op: "decide?", item: "a/1", want: hand},
		}},
		{"an ack is remembered while a commit begun before it is open", []step{
			{op: "commit"}, {op: "scan"}, {op: "take", item: "a/1"}, {op: "ack", item: "a/1"}, {op: "finish"},
			{op: "decide?", item: "a/1", want: skip}, // the commit's epoch: its hand-over skips it
			{op: "finish"}, {op: "scan"}, {op: "decide?", item: "a/1", want: hand},
		}},
		{"moved to dead during the scan fences its execution", []step{
			{op: "scan"}, {op: "take", item: "a/1"}, {op: "finish"},
			{op: "scan"}, {op: "pop", item: "a/1"}, {op: "failed", item: "a/1"},
			{op: "decide?", item: "a/2", want: holdBack}, // a failure is being recorded
			{op: "bury", item: "a/1"},
			{op: "decide?", item: "a/1", want: skipDead}, {op: "decide?", item: "a/2", want: holdBack},
			{op: "decide?", item: "b/1", want: hand},
			{op: "finish"}, {op: "scan"}, {op: "decide?", item: "a/1", want: hand}, {op: "decide?", item: "a/2", want: hand},
		}},
		{"released: handed out again by a later scan, fenced for the scans begun before", []step{
			{op: "scan"}, {op: "take", item: "a/1"}, {op: "take", item: "a/2"},
			{op: "release", item: "a/1"}, {op: "state?", item: "a/1", state: out},
			{op: "decide?", item: "a/1", want: holdBack}, {op: "decide?", item: "a/3", want: holdBack},
			{op: "decide?", item: "b/1", want: hand},
			{op: "finish"}, {op: "scan"}, {op: "decide?", item: "a/1", want: hand},
		}},
		{"an execution waiting for a retry is held back", []step{
			{op: "scan"}, {op: "retry", item: "a/1"}, {op: "decide?", item: "a/1", want: holdBack},
			{op: "decide?", item: "b/1", want: hand},
		}},
		{"a timer waits, fires unconfirmed, is confirmed", []step{
			{op: "scan"}, {op: "take", item: "a/t@1"}, {op: "state?", item: "a/t@1", state: waiting},
			{op: "fire"}, {op: "state?", item: "a/t@1", state: unconfirmed},
			{op: "queue", item: "a/t@1"}, {op: "pop", item: "a/t@1"}, {op: "state?", item: "a/t@1", state: handling},
			{op: "handled", item: "a/t@1"}, {op: "ack", item: "a/t@1"}, {op: "state?", item: "a/t@1", state: out},
		}},
		{"a cancelled timer leaves no fence", []step{
			{op: "scan"}, {op: "take", item: "a/t@1"}, {op: "cancel", item: "a/t@1"},
			{op: "decide?", item: "a/t@1", want: hand}, {op: "decide?", item: "a/2", want: hand},
		}},
		{"a popped entry that left its queue is skipped", []step{
			{op: "scan"}, {op: "take", item: "a/1"}, {op: "take", item: "a/2"}, {op: "release", item: "a/1"},
			{op: "pop", item: "a/2"}, {op: "state?", item: "a/2", state: handling},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stats counters
			h := newHold(t.Context(), 0, nil, &gens{})
			f := newFlight[string, string](stepKind{}, &stats, 4, newRetries(time.Second, time.Minute), func(*hold) {})
			var epochs []uint64
			for i, st := range c.steps {
				msg := c.name + ": step " + st.op + " " + st.item
				e := f.items[st.item]
				switch st.op {
				case "scan", "commit":
					epochs = append(epochs, f.begin())
				case "finish":
					f.finish(epochs[len(epochs)-1])
					epochs = epochs[:len(epochs)-1]
				case "take":
					f.take(h, st.item, stepT0, stepT0)
				case "queue":
					f.queue(e, stepT0)
				case "pop":
					require.Same(t, e, f.pop(e.at), msg)
				case "handled":
					f.settle(e, nil, nil)
				case "failed":
					f.settle(e, &execstore.Failure{Error: "failed"}, assert.AnError)
				case "ack":
					f.ack(e)
				case "bury":
					f.bury(e)
				case "release":
					f.release(e)
				case "cancel":
					f.cancel(e)
				case "fire":
					f.fire(stepT0.Add(time.Second))
				case "retry":
					f.retries.failed(f.kind.lane(st.item), time.Now())
				case "decide?":
					assert.Equal(t, st.want, f.decide(st.item, f.kind.lane(st.item), epochs[len(epochs)-1], time.Now()), "step %d: %s", i, msg)
				case "state?":
					got := out
					if e != nil {
						got = e.state
					}
					assert.Equal(t, st.state, got, "step %d: %s", i, msg)
				}
				checkFlight(t, f, []*hold{h}, msg)
			}
		})
	}
}

// Once no scan or commit is open, a flight forgets every ack, move to dead and fence.
func TestFlightForgets(t *testing.T) {
	var stats counters
	h := newHold(t.Context(), 0, nil, &gens{})
	f := newFlight[string, string](stepKind{}, &stats, 2, newRetries(time.Second, time.Minute), func(*hold) {})
	n := f.begin()
	c := f.begin()
	for i := range 100 {
		e := f.take(h, "x/"+strings.Repeat("i", i+1), stepT0, stepT0)
		switch i % 3 {
		case 0:
			f.ack(e)
		case 1:
			f.bury(e)
		default:
			f.release(e)
		}
	}
	f.finish(n)
	assert.NotEmpty(t, f.acked, "a commit is open still")
	f.finish(c)
	assert.Empty(t, f.acked)
	assert.Empty(t, f.dead)
	assert.Empty(t, f.fence)
	assert.Empty(t, f.items)
	assert.Zero(t, stats.inFlight.Load())
}

// An execution's items queued or in a handler share one lane, and an execution with none
// takes a lane with none while there is one: executions never wait behind one another while
// a lane is idle, whatever their keys hash to. With every lane busy, the least loaded.
func TestLanesAssigned(t *testing.T) {
	var stats counters
	h := newHold(t.Context(), 0, nil, &gens{})
	f := newFlight[string, string](stepKind{}, &stats, 2, newRetries(time.Second, time.Minute), func(*hold) {})
	check := func() {
		t.Helper()
		loads := make([]int, len(f.loads))
		for _, e := range f.items {
			if e.state == queued || e.state == handling {
				loads[e.at]++
				assert.Equal(t, f.assigned[e.lane], e.at, "%s's lane", e.key)
			}
		}
		assert.Equal(t, loads, f.loads)
	}
	for round := range 20 { // the keys' hashed lanes vary: every round, new keys
		a, b, c := fmt.Sprint("a", round), fmt.Sprint("b", round), fmt.Sprint("c", round)
		a1 := f.take(h, a+"/1", stepT0, stepT0)
		b1 := f.take(h, b+"/1", stepT0, stepT0)
		require.NotEqual(t, a1.at, b1.at, "b waits behind a while a lane is idle")
		a2 := f.take(h, a+"/2", stepT0, stepT0)
		assert.Equal(t, a1.at, a2.at, "a's items share a lane")
		c1 := f.take(h, c+"/1", stepT0, stepT0)
		assert.Equal(t, b1.at, c1.at, "with no idle lane, the least loaded")
		check()
		require.Same(t, a1, f.pop(a1.at))
		f.settle(a1, nil, nil) // handled: a2 still holds a's lane
		require.Same(t, a2, f.pop(a1.at))
		check()
		f.settle(a2, nil, nil)
		f.ack(a1)
		f.ack(a2)
		_, held := f.assigned[a]
		assert.False(t, held, "a holds no lane with nothing queued or in a handler")
		a3 := f.take(h, a+"/3", stepT0, stepT0)
		assert.NotEqual(t, b1.at, a3.at, "a's next item takes the idle lane")
		check()
		for _, e := range []*entry[string, string]{b1, c1, a3} {
			require.Same(t, e, f.pop(e.at))
			f.release(e)
		}
		check()
		assert.Empty(t, f.assigned)
		assert.Equal(t, []int{0, 0}, f.loads)
	}
}
