package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// RunShared checks what two stores over the same data keep, as two processes of an engine
// that share executions have them. A stale snapshot ends in a conflict, never in a lost
// update. An event processed through one store is refused through the other, so it is
// processed once. Creates race to one winner. Outbox entries, spawn intents and timers
// committed through either store are relayed, acked and deleted through either, each
// execution's entries in commit order. Trace indices keep increasing across both. Handlers
// running through both at once process each event exactly once.
//
// open must return two stores over the same new, empty data, configured with their defaults,
// and release them with t.Cleanup. Each must have the caches of its own it would have in a
// process of its own. For a store without any, such as package memstore, the same store
// twice is right.
//
// What a store may do: LoadForEvent may answer from what the store itself last committed or
// read. So it may return a snapshot older than the other store's last commit. The commit made
// from it must then fail with a *execstore.ConflictError, and the store's next LoadForEvent
// must return the current snapshot. It may also call an event processed through the other
// store unprocessed. Commit's dedupe guard must then refuse it with an
// *execstore.AlreadyProcessedError. What it must keep: Load, IsProcessed, ReadTrace and the
// relay methods see every commit that returned before they were called, through whichever
// store.
func RunShared(t *testing.T, open func(t *testing.T) (first, second execstore.Store)) {
	t.Helper()
	for _, b := range sharedBehaviours {
		t.Run(b.name, func(t *testing.T) {
			first, second := open(t)
			b.check(t, first, second)
		})
	}
}

type sharedBehaviour struct {
	name  string
	check func(t *testing.T, first, second execstore.Store)
}

// sharedBehaviours lists what RunShared checks.
var sharedBehaviours = []sharedBehaviour{
	{"StaleSnapshotEndsInAConflict", staleSnapshotConflicts},
	{"EventProcessedByTheOtherStoreIsRefused", otherStoresEventRefused},
	{"CreatesAcrossStoresHaveOneWinner", createsAcrossStores},
	{"HandlersTakingTurnsLoseNothing", handlersTakingTurns},
	{"RelaysAcrossStores", relaysAcrossStores},
	{"ConcurrentHandlersProcessEachEventOnce", concurrentHandlersAcrossStores},
}

// maxConflicts bounds the conflicts handle goes through for one event.
const maxConflicts = 50

// handle runs event on execution id through s as an engine's handler does: LoadForEvent, and
// unless it reports the event processed, a commit of the snapshot with " "+event appended, an
// emit of event and a trace step; after a conflict, the same again from a new LoadForEvent. It
// reports whether this call committed the event (false: LoadForEvent called it processed or
// Commit refused it with ErrAlreadyProcessed) and how many conflicts it met. Any other error
// fails t; handle is safe to call from other goroutines than the test's.
func handle(t *testing.T, s execstore.Store, id, event string) (committed bool, conflicts int) {
	t.Helper()
	for {
		exe, hit, err := s.LoadForEvent(bg, id, event)
		if !assert.NoError(t, err, "LoadForEvent(%s, %s)", id, event) || hit {
			return false, conflicts
		}
		if exe == nil {
			exe = newExe(id)
		}
		exe.Data = append(exe.Data, " "+event...)
		_, err = s.Commit(bg, exe, execstore.Commit{
			Emits:            []execstore.Emit{{TargetID: "t", Event: []byte(event)}},
			ProcessedEventID: event,
			Trace:            map[string]any{"event": event},
		})
		switch {
		case err == nil:
			return true, conflicts
		case errors.Is(err, execstore.ErrAlreadyProcessed):
			var ae *execstore.AlreadyProcessedError
			if assert.ErrorAs(t, err, &ae) {
				assert.Equal(t, id, ae.ExecutionID)
				assert.Equal(t, event, ae.EventID)
			}
			return false, conflicts
		case errors.Is(err, execstore.ErrConflict) && conflicts < maxConflicts:
			conflicts++
		default:
			t.Errorf("commit of %s on %s after %d conflicts: %v", event, id, conflicts, err)
			return false, conflicts
		}
	}
}

// pendingOutbox returns the pending outbox of s and checks what holds of any: seqs unique, and
// each execution's entries in commit order.
func pendingOutbox(t *testing.T, s execstore.Store) []execstore.OutboxEntry {
	t.Helper()
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	seqs := map[int64]bool{}
	versions := map[string]int64{}
	for _, p := range pending {
		assert.False(t, seqs[p.Seq], "seq %d twice", p.Seq)
		seqs[p.Seq] = true
		assert.GreaterOrEqual(t, p.Version, versions[p.SourceID], "%s's entries out of commit order", p.SourceID)
		versions[p.SourceID] = p.Version
	}
	return pending
}

// events returns the events of entries, in their order.
func events(entries []execstore.OutboxEntry) []string {
	var evs []string
	for _, p := range entries {
		evs = append(evs, string(p.Event))
	}
	return evs
}

// requireSeen fails t unless both stores' Load of want.ID return it exactly, and both call
// each of processed processed.
func requireSeen(t *testing.T, first, second execstore.Store, want *execstore.Execution, processed ...string) {
	t.Helper()
	for i, s := range []execstore.Store{first, second} {
		got, err := s.Load(bg, want.ID)
		require.NoError(t, err)
		require.Equal(t, want, got, "Load through store %d", i+1)
		for _, event := range processed {
			hit, err := s.IsProcessed(bg, want.ID, event)
			require.NoError(t, err)
			assert.True(t, hit, "%s not processed through store %d", event, i+1)
		}
	}
}

// The first store creates an execution and reads it back; the second loads it and commits
// version 2; the first, from what its LoadForEvent gives it (version 1 from a cache, or 2),
// commits: version 1 is a conflict with expected 1 and found 2, after which its LoadForEvent
// returns version 2 and the commit made from it succeeds; version 2 succeeds at once. No update
// is lost: the snapshot carries both writes, and the outbox one entry of each.
func staleSnapshotConflicts(t *testing.T, first, second execstore.Store) {
	e := newExe("e")
	e.Data = []byte("v1")
	mustCommit(t, first, e, execstore.Commit{ProcessedEventID: "a1"})
	exe, hit, err := first.LoadForEvent(bg, "e", "a2")
	require.NoError(t, err)
	require.Equal(t, e, exe)
	require.False(t, hit)

	other, err := second.Load(bg, "e")
	require.NoError(t, err)
	require.Equal(t, e, other, "the second store does not see the first's commit")
	other.Data = append(other.Data, "+second"...)
	mustCommit(t, second, other, execstore.Commit{ProcessedEventID: "b1", Emits: []execstore.Emit{{Event: []byte("b1")}}})
	require.EqualValues(t, 2, other.Version)

	mine, hit, err := first.LoadForEvent(bg, "e", "a2")
	require.NoError(t, err)
	require.False(t, hit)
	require.Contains(t, []int64{1, 2}, mine.Version)
	a2 := execstore.Commit{ProcessedEventID: "a2", Emits: []execstore.Emit{{Event: []byte("a2")}}}
	if mine.Version == 1 {
		require.Equal(t, e, mine, "a cached snapshot that is not the store's own")
		mine.Data = append(mine.Data, "+first"...)
		_, err = first.Commit(bg, mine, a2)
		requireConflict(t, err, "e", 1, 2)
		assert.EqualValues(t, 1, mine.Version)
		mine, hit, err = first.LoadForEvent(bg, "e", "a2")
		require.NoError(t, err)
		require.False(t, hit)
		require.Equal(t, other, mine, "the reload after a conflict is not the current snapshot")
	}
	require.Equal(t, other, mine)
	mine.Data = append(mine.Data, "+first"...)
	mustCommit(t, first, mine, a2)
	assert.EqualValues(t, 3, mine.Version)
	assert.Equal(t, "v1+second+first", string(mine.Data))
	requireSeen(t, first, second, mine, "a1", "b1", "a2")
	for _, s := range []execstore.Store{first, second} {
		assert.Equal(t, []string{"b1", "a2"}, events(pendingOutbox(t, s)))
	}
}

// The second store commits event e1; the first, which may hold an older snapshot of its own,
// asks LoadForEvent about e1: processed (then at the version that holds it), or not, and then
// its commit of e1 is refused with an *AlreadyProcessedError at version 2 — whatever version it
// commits against, since e1 is in the set. e1 is processed once: the snapshot, the outbox and
// the trace are the second store's, nothing of the first's attempt. The first store goes on with
// the next event.
func otherStoresEventRefused(t *testing.T, first, second execstore.Store) {
	e := newExe("e")
	mustCommit(t, first, e, execstore.Commit{ProcessedEventID: "a0", Emits: []execstore.Emit{{Event: []byte("a0")}}})
	_, hit, err := first.LoadForEvent(bg, "e", "e1")
	require.NoError(t, err)
	require.False(t, hit)

	other, hit, err := second.LoadForEvent(bg, "e", "e1")
	require.NoError(t, err)
	require.False(t, hit)
	require.Equal(t, e, other)
	other.Data = []byte("second")
	mustCommit(t, second, other, execstore.Commit{ProcessedEventID: "e1",
		Emits: []execstore.Emit{{Event: []byte("e1 by second")}}, Trace: map[string]any{"by": "second"}})

	mine, hit, err := first.LoadForEvent(bg, "e", "e1")
	require.NoError(t, err)
	if hit {
		assert.Equal(t, other, mine, "processed reported for a version that does not hold the event")
	} else {
		require.Contains(t, []int64{1, 2}, mine.Version)
		mine.Data = []byte("first")
		want := *mine
		c := refused("e1")
		c.Emits = []execstore.Emit{{Event: []byte("e1 by first")}}
		_, err := first.Commit(bg, mine, c)
		requireAlreadyProcessed(t, err, "e", "e1", 2)
		assert.Equal(t, want, *mine)
	}
	requireSeen(t, first, second, other, "a0", "e1")
	for _, s := range []execstore.Store{first, second} {
		st := stateOf(t, s, "e")
		assert.Equal(t, []string{"a0", "e1 by second"}, events(st.outbox))
		assert.Empty(t, st.spawns)
		assert.Empty(t, st.timers)
		require.Len(t, st.traces[0], 1)
		assert.Equal(t, map[string]any{"by": "second"}, st.traces[0][0].Fields)
	}

	committed, conflicts := handle(t, first, "e", "e2")
	assert.True(t, committed)
	assert.LessOrEqual(t, conflicts, 1)
	got, err := second.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, 3, got.Version)
	assert.Equal(t, "second e2", string(got.Data))
}

// Creates through both stores: a create of an execution the other store made is a conflict
// with found 1, or a refusal at version 1 when its event is the creator's. Of creators of one
// id racing through the two stores exactly one wins; the loser gets a conflict with expected 0
// and found 1 when the two carried different events, a refusal when they carried the same one
// (a create event delivered twice).
func createsAcrossStores(t *testing.T, first, second execstore.Store) {
	mustCommit(t, first, newExe("e"), execstore.Commit{ProcessedEventID: "c1"})
	x := newExe("e")
	_, err := second.Commit(bg, x, execstore.Commit{ProcessedEventID: "c2"})
	requireConflict(t, err, "e", 0, 1)
	_, err = second.Commit(bg, x, execstore.Commit{ProcessedEventID: "c1"})
	requireAlreadyProcessed(t, err, "e", "c1", 1)
	assert.EqualValues(t, 0, x.Version)

	const rounds = 6
	for r := range rounds {
		id := fmt.Sprintf("new%d", r)
		sameEvent := r%2 == 0
		var wins atomic.Int64
		var wg sync.WaitGroup
		for i, s := range []execstore.Store{first, second} {
			wg.Go(func() {
				event := "create"
				if !sameEvent {
					event = fmt.Sprintf("create by %d", i+1)
				}
				_, err := s.Commit(bg, newExe(id), execstore.Commit{ProcessedEventID: event,
					Emits: []execstore.Emit{{Event: []byte(id)}}})
				var ae *execstore.AlreadyProcessedError
				var ce *execstore.ConflictError
				switch {
				case err == nil:
					wins.Add(1)
				case sameEvent && errors.As(err, &ae):
					assert.Equal(t, execstore.AlreadyProcessedError{ExecutionID: id, EventID: event, Version: 1}, *ae)
				case !sameEvent && errors.As(err, &ce):
					assert.Equal(t, execstore.ConflictError{ExecutionID: id, Expected: 0, Found: 1}, *ce)
				default:
					t.Errorf("create of %s by %d (same event %v): %v", id, i+1, sameEvent, err)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d", r)
	}
	var want []string
	for r := range rounds {
		want = append(want, fmt.Sprintf("new%d", r))
	}
	for _, s := range []execstore.Store{first, second} {
		got := events(pendingOutbox(t, s))
		sort.Strings(got)
		assert.Equal(t, want, got, "one entry per created execution, the winner's")
	}
}

// Events of one execution handled in turn through one store and the other, each handler
// starting from LoadForEvent, with trace steps appended through the other store now and then:
// every event is committed once, after at most one conflict (a stale snapshot, which the
// conflict makes the store read again); the snapshot carries every event in order; the outbox
// holds one entry per event in commit order, whichever store took its seq, and acks through the
// store that did not commit an entry empty it for both; the trace indices go 0, 1, 2, … across
// both stores' commits and appends.
func handlersTakingTurns(t *testing.T, first, second execstore.Store) {
	stores := []execstore.Store{first, second}
	const turns = 6
	want := newExe("e").Data
	var steps, evs []string
	for i := range turns {
		event := fmt.Sprintf("ev%d", i)
		committed, conflicts := handle(t, stores[i%2], "e", event)
		require.True(t, committed, event)
		assert.LessOrEqual(t, conflicts, 1, event)
		want = append(want, " "+event...)
		evs = append(evs, event)
		steps = append(steps, event)
		if i%3 == 1 {
			step := "append after " + event
			require.NoError(t, stores[(i+1)%2].AppendTrace(bg, "e", map[string]any{"event": step}))
			steps = append(steps, step)
		}
	}
	for i, s := range stores {
		got, err := s.Load(bg, "e")
		require.NoError(t, err)
		assert.EqualValues(t, turns, got.Version)
		assert.Equal(t, string(want), string(got.Data))
		assert.EqualValues(t, len(steps), got.TraceNext, "store %d", i+1)
		trace := readTrace(t, s, "e")
		require.Len(t, trace, len(steps))
		for j, st := range trace {
			assert.EqualValues(t, j, st.Index)
			assert.Equal(t, steps[j], st.Fields["event"])
		}
		pending := pendingOutbox(t, s)
		assert.Equal(t, evs, events(pending), "store %d", i+1)
	}
	for _, p := range pendingOutbox(t, first) {
		// ev0 was committed through the first store, ev1 through the second, …
		require.NoError(t, stores[int(p.Version)%2].AckOutbox(bg, "e", p.Seq))
	}
	for _, s := range stores {
		assert.Empty(t, pendingOutbox(t, s))
	}
}

// What one store commits, the other relays: outbox entries and spawn intents committed through
// both, on one execution in turn and on another, are pending through both with unique seqs,
// each execution's in commit order; a limit takes the oldest; an ack through either store
// removes an entry for both. A timer scheduled through one store and rescheduled through the
// other is due through both at its last fire time only, and a guarded DeleteTimer through the
// first store removes it only at that fire time.
func relaysAcrossStores(t *testing.T, first, second execstore.Store) {
	stores := []execstore.Store{first, second}
	commit := func(s execstore.Store, id string, c execstore.Commit) {
		t.Helper()
		exe, err := s.Load(bg, id)
		require.NoError(t, err)
		if exe == nil {
			exe = newExe(id)
		}
		mustCommit(t, s, exe, c)
	}
	entry := func(name string, fireAt time.Time) execstore.Commit {
		return execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte(name)}},
			Spawns: []execstore.Spawn{{ChildID: name, RootPath: "F.A"}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", fireAt)}}
	}
	commit(first, "a", entry("a1", at(10)))
	commit(second, "b", entry("b1", at(30)))
	commit(second, "a", entry("a2", at(20)))
	commit(first, "a", entry("a3", at(20)))
	commit(first, "b", entry("b2", at(30)))
	commit(second, "a", entry("a4", at(20)))

	var all []execstore.OutboxEntry
	for i, s := range stores {
		pending := pendingOutbox(t, s)
		require.Len(t, pending, 6, "store %d", i+1)
		if i == 0 {
			all = pending
		} else {
			assert.Equal(t, all, pending, "the stores see different outboxes")
		}
		var ofA, ofB []string
		for _, p := range pending {
			if p.SourceID == "a" {
				ofA = append(ofA, string(p.Event))
			} else {
				ofB = append(ofB, string(p.Event))
			}
		}
		assert.Equal(t, []string{"a1", "a2", "a3", "a4"}, ofA)
		assert.Equal(t, []string{"b1", "b2"}, ofB)
		limited, err := s.PendingOutbox(bg, 3)
		require.NoError(t, err)
		assert.Equal(t, all[:3], limited)

		spawns, err := s.PendingSpawns(bg, 0)
		require.NoError(t, err)
		require.Len(t, spawns, 6)
		children := map[string][]string{}
		for _, sp := range spawns {
			children[sp.ParentID] = append(children[sp.ParentID], sp.ChildID)
		}
		assert.Equal(t, map[string][]string{"a": {"a1", "a2", "a3", "a4"}, "b": {"b1", "b2"}}, children)

		assert.Empty(t, due(t, s, at(15)), "a rescheduled timer still due at its first fire time")
		assert.Equal(t, []execstore.DueTimer{{ExecutionID: "a", Path: "T", FireAt: at(20)}, {ExecutionID: "b", Path: "T", FireAt: at(30)}},
			unversioned(due(t, s, at(35))))
	}
	for i, p := range all {
		require.NoError(t, stores[i%2].AckOutbox(bg, p.SourceID, p.Seq))
	}
	spawns, err := second.PendingSpawns(bg, 0)
	require.NoError(t, err)
	for i, sp := range spawns {
		require.NoError(t, stores[i%2].AckSpawn(bg, sp.ParentID, sp.Seq))
	}
	deleted, err := first.DeleteTimer(bg, "a", "T", at(10))
	require.NoError(t, err)
	assert.False(t, deleted, "a timer deleted at a fire time the other store replaced")
	deleted, err = first.DeleteTimer(bg, "a", "T", at(20))
	require.NoError(t, err)
	assert.True(t, deleted)
	for _, s := range stores {
		st := stateOf(t, s)
		assert.Empty(t, st.outbox)
		assert.Empty(t, st.spawns)
		assert.Equal(t, []execstore.DueTimer{{ExecutionID: "b", Path: "T", FireAt: at(30)}}, unversioned(st.timers))
	}
}

// Every event of two executions delivered to both stores at once, as a redelivery to two
// processes, each handled by LoadForEvent and Commit with a reload after a conflict: each event
// is committed exactly once, through one store or the other, and the snapshot, the dedupe set
// and the outbox of each execution carry each event once, in commit order.
func concurrentHandlersAcrossStores(t *testing.T, first, second execstore.Store) {
	const execs, evs = 2, 5
	var committed [execs][evs]atomic.Int32
	var wg sync.WaitGroup
	for x := range execs {
		for _, s := range []execstore.Store{first, second} {
			wg.Go(func() {
				for i := range evs {
					if ok, _ := handle(t, s, fmt.Sprintf("x%d", x), fmt.Sprintf("x%d-ev%d", x, i)); ok {
						committed[x][i].Add(1)
					}
				}
			})
		}
	}
	wg.Wait()
	pending := pendingOutbox(t, second)
	for x := range execs {
		id := fmt.Sprintf("x%d", x)
		var want []string
		for i := range evs {
			event := fmt.Sprintf("%s-ev%d", id, i)
			assert.EqualValues(t, 1, committed[x][i].Load(), "%s committed %d times", event, committed[x][i].Load())
			want = append(want, event)
		}
		var ofX []execstore.OutboxEntry
		for _, p := range pending {
			if p.SourceID == id {
				ofX = append(ofX, p)
			}
		}
		assert.Equal(t, want, events(ofX), "%s's outbox", id)
		got, err := first.Load(bg, id)
		require.NoError(t, err)
		assert.EqualValues(t, evs, got.Version)
		fields := bytes.Fields(got.Data)[1:] // after newExe's snapshot
		var inData []string
		for _, f := range fields {
			inData = append(inData, string(f))
		}
		assert.Equal(t, want, inData, "%s's snapshot", id)
		requireSeen(t, first, second, got, want...)
	}
}
