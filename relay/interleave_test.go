package relay

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/memstore"
)

// harness drives a session by hand, over a memstore: the test sends the scans, tells the
// session of commits (Begin, End) and of lease changes at the points it chooses, and holds
// handlers until it lets them return. No dispatcher and no lease store run: nothing happens
// that the test does not do, but for the lanes' and the settler's goroutines.
type harness[T any, K comparable] struct {
	t     *testing.T
	store *memstore.Store
	r     *runner[T, K]
	s     *session[T, K]
	exes  map[string]*execstore.Execution

	mu      sync.Mutex
	calls   []string                 // every handler call, in order, by describe without the kind ("S/1")
	gates   map[string]chan error    // a handler call of the item waits for its result here
	entered map[string]chan struct{} // closed when the item's handler is called
}

func newHarness[T any, K comparable](t *testing.T, k func(execstore.Store) kind[T, K], opts Options) *harness[T, K] {
	store := memstore.New(memstore.Options{Partitions: 4})
	t.Cleanup(func() { _ = store.Close(context.Background()) })
	b := &harness[T, K]{t: t, store: store, exes: map[string]*execstore.Execution{},
		gates: map[string]chan error{}, entered: map[string]chan struct{}{}}
	kd := k(store)
	if opts.RetryMin == 0 {
		opts.RetryMin, opts.RetryMax = time.Millisecond, 5*time.Millisecond
	}
	b.r = newRunner[T, K](kd, store, b.handle, opts.withDefaults(relayLeaseKey), "relay", "deliver", wake.Outbox)
	ctx := context.Background()
	b.s = newSession(b.r, ctx)
	b.s.settleWG.Go(b.s.settleLoop)
	t.Cleanup(b.stop)
	return b
}

func (b *harness[T, K]) handle(_ context.Context, item T) error {
	_, id, _ := strings.Cut(b.r.kind.describe(item), " ") // "outbox S/1": "S/1"
	b.mu.Lock()
	b.calls = append(b.calls, id)
	if b.gates[id] == nil && b.gates[nextItem] != nil {
		id = nextItem
	}
	gate := b.gates[id]
	delete(b.gates, id)
	if c := b.entered[id]; c != nil {
		close(c)
		delete(b.entered, id)
	}
	b.mu.Unlock()
	if gate != nil {
		return <-gate
	}
	return nil
}

// nextItem is the id gate takes for the next handler call of any item not gated by its own.
const nextItem = "(next)"

// gate makes the next handler call of item id (nextItem: of any item) wait for the error
// sent on the returned channel; entered is closed once the call began.
func (b *harness[T, K]) gate(id string) (result chan error, entered chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	result, entered = make(chan error, 1), make(chan struct{})
	b.gates[id], b.entered[id] = result, entered
	return result, entered
}

func (b *harness[T, K]) stop() {
	s := b.s
	s.mu.Lock()
	s.stopping = true
	s.mu.Unlock()
	s.laneWG.Wait()
	giveUp := time.AfterFunc(time.Second, s.cancelAck) // as Run does after StopTimeout
	defer giveUp.Stop()
	s.mu.Lock()
	s.lanesDone = true
	s.mu.Unlock()
	poke(s.settleWake)
	s.settleWG.Wait()
}

// lease is a lease held for dur from now, in no lease store.
func (b *harness[T, K]) lease() *lease {
	ls := &lease{key: "harness", dur: 10 * time.Second, base: time.Now()}
	ls.until.Store(int64(ls.dur))
	return ls
}

// pause makes ls not live, though not run out: a renewal is late.
func pause(ls *lease) { ls.until.Store(int64(time.Since(ls.base) + ls.margin()/2)) }

// resume makes ls live again: the late renewal came back.
func resume(ls *lease) { ls.until.Store(int64(time.Since(ls.base) + ls.dur)) }

// hold makes the session hold execution id's partition under ls.
func (b *harness[T, K]) hold(id string, ls *lease) *hold {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return b.s.addHold(b.r.partOf(id), ls)
}

// commit commits c on execution id, as another process would (the session is told
// nothing), and returns what it wrote as a hand-over would carry it.
func (b *harness[T, K]) commit(id string, c execstore.Commit) *wake.Committed {
	exe := b.exes[id]
	if exe == nil {
		exe = &execstore.Execution{ID: id, DefinitionID: "harness", Status: execstore.Running}
		b.exes[id] = exe
	}
	seqs, err := b.store.Commit(context.Background(), exe, c)
	require.NoError(b.t, err)
	out := &wake.Committed{ExecutionID: id, Version: exe.Version, Timers: c.Timers}
	for i, e := range c.Emits {
		out.Outbox = append(out.Outbox, execstore.OutboxEntry{Seq: seqs[i], SourceID: id, Version: exe.Version,
			TargetID: e.TargetID, Event: e.Event})
	}
	return out
}

// emit commits one outbox entry of source to target through this process: Begin, the
// commit, and End with what it wrote (nil when unknown, to say its outcome is unknown).
func (b *harness[T, K]) emit(source, target string, unknown bool) *wake.Committed {
	begun := b.s.Begin(source)
	c := b.commit(source, execstore.Commit{Emits: []execstore.Emit{{TargetID: target, Event: []byte("e")}}})
	if unknown {
		b.s.End(source, begun, nil)
	} else {
		b.s.End(source, begun, c)
	}
	return c
}

// failOnce commits one outbox entry of source to target through this process, and fails
// its handler's first call: it returns once the entry is released, left in the store.
func (b *harness[T, K]) failOnce(source, target string) *wake.Committed {
	b.t.Helper()
	// Gated before the commit: its hand-over may reach the handler before emit returns.
	result, entered := b.gate(nextItem)
	c := b.emit(source, target, false)
	<-entered
	result <- errors.New("failed once")
	settleUntil(b.t, func() bool { return b.held() == 0 }, "the entry released")
	return c
}

// scan sends one scan of every partition held, as the dispatcher does.
func (b *harness[T, K]) scan() {
	b.s.mu.Lock()
	parts, holds := b.s.scannable()
	// A paused hold is scanned as the dispatcher would have when it sent the scan before
	// the pause: its answer comes while the lease is not live.
	for p, h := range b.s.holds {
		if holds[p] == nil {
			parts = append(parts, p)
			holds[p] = h
		}
	}
	b.s.mu.Unlock()
	_, _, err := b.s.scan(parts, holds, nil, b.r.opts.Clock())
	require.NoError(b.t, err)
}

// read sends the targeted read the dispatcher sends for a scan owed by what the session
// left in the store, or by timers come due, and returns the sources it read: none when the
// dispatcher would scan the partitions instead.
func (b *harness[T, K]) read() []string {
	b.s.mu.Lock()
	parts, holds := b.s.scannable()
	targets := b.s.targets(holds)
	b.s.mu.Unlock()
	if targets == nil {
		return nil
	}
	_, _, err := b.s.scan(parts, holds, targets, b.r.opts.Clock())
	require.NoError(b.t, err)
	return slices.Sorted(maps.Keys(targets))
}

func (b *harness[T, K]) held() int {
	b.s.mu.Lock()
	defer b.s.mu.Unlock()
	return len(b.s.fl.items)
}

// settledAll waits until nothing is in flight.
func (b *harness[T, K]) settledAll() {
	b.t.Helper()
	settleUntil(b.t, func() bool { return b.held() == 0 }, "nothing left in flight")
}

// settleUntil waits until cond holds, asking every millisecond, and fails t once 10s passed
// by time.Now. Inside a testing/synctest bubble its sleeps and its deadline are the bubble's
// virtual time: each sleep lets every goroutine of the bubble run until it blocks.
func settleUntil(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if !time.Now().Before(deadline) {
			require.FailNow(t, "not within 10s: "+msg)
		}
		time.Sleep(time.Millisecond)
	}
}

func (b *harness[T, K]) handled() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.calls...)
}

func newOutboxHarness(t *testing.T) *harness[execstore.OutboxEntry, entryKey] {
	return newHarness(t, func(s execstore.Store) kind[execstore.OutboxEntry, entryKey] { return outboxKind{store: s} }, Options{})
}

func entryName(c *wake.Committed) string { return fmt.Sprintf("%s/%d", c.ExecutionID, c.Outbox[0].Seq) }

// Two renewals answered late, within their timeouts: the lease stops being live, then is
// live again, and nothing was lost. e1, committed in that gap, is not handed over: its
// source is soiled. A scan answered in the gap hands nothing out, and must teach nothing
// either: the source stays soiled, so its next commit e2 is not handed over ahead of e1,
// and the next scan returns both, in commit order. In virtual time.
func TestScanWhileTheLeaseIsNotLiveTeachesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		ls := b.lease()
		b.hold("S", ls)
		pause(ls)
		e1 := b.emit("S", "T", false)
		b.scan() // answered in the gap
		assert.Zero(t, b.held(), "nothing handed out while the lease is not live")
		resume(ls)
		e2 := b.emit("S", "T", false)
		assert.Zero(t, b.held(), "e2 not handed over while e1 is pending in the store")
		b.scan()
		b.settledAll()
		assert.Equal(t, []string{entryName(e1), entryName(e2)}, b.handled())
	})
}

// A commit whose outcome is unknown may have written anything: its execution's next commit
// is not handed over, and a scan returns both in commit order. In virtual time.
func TestCommitOfUnknownOutcomeIsNotFollowed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		b.hold("S", b.lease())
		e1 := b.emit("S", "T", false)
		b.settledAll()
		e2 := b.emit("S", "T", true)
		e3 := b.emit("S", "T", false)
		assert.Zero(t, b.held(), "e3 not handed over while e2 may be pending in the store")
		b.scan()
		b.settledAll()
		assert.Equal(t, []string{entryName(e1), entryName(e2), entryName(e3)}, b.handled())
	})
}

// The lease is lost while e1's handler runs (it ignores its context), and the relay takes
// the partition back at once. The new hold knows nothing of S: e2, committed under it, is
// found by a scan, which skips e1 (in flight) and queues e2 behind it in T's lane; e3 is
// handed over behind them. e1's handler then fails: it takes e2 and e3 back to the store
// with it, and the next scan returns all three in commit order. In virtual time.
func TestPartitionTakenBackWhileAnItemIsInItsHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		h1 := b.hold("S", b.lease())
		e1 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		result, entered := b.gate(entryName(e1))
		b.scan()
		<-entered
		b.s.lose(h1, errLeaseLost)
		b.hold("S", b.lease())
		e2 := b.emit("S", "T", false)
		assert.Equal(t, 1, b.held(), "e2 not handed over: the new hold knows nothing of S")
		b.scan()
		e3 := b.emit("S", "T", false)
		assert.Equal(t, 3, b.held(), "e2 taken by the scan, e3 handed over, both behind e1")

		result <- errors.New("failed after its hold ended")
		settleUntil(t, func() bool { return b.held() == 0 },
			"e1 back in the store, with e2 and e3")
		assert.Equal(t, []string{entryName(e1)}, b.handled(), "nothing handed out behind e1")
		b.scan()
		b.settledAll()
		assert.Equal(t, []string{entryName(e1), entryName(e1), entryName(e2), entryName(e3)}, b.handled())
	})
}

// An item that leaves flight without its ack takes its execution's items queued behind it
// out of flight too, whatever hold they were taken under: e2, taken under another
// partition's hold (another source, the same target), queued behind e1 in T's lane, is
// released with e1 when e1's hold ends under its handler. In virtual time.
func TestReleaseTakesTheItemsBehindIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		// Two sources in two partitions, the same target.
		src1, src2 := "S", ""
		for i := 0; src2 == ""; i++ {
			if id := fmt.Sprintf("S%d", i); b.r.partOf(id) != b.r.partOf(src1) {
				src2 = id
			}
		}
		h1 := b.hold(src1, b.lease())
		b.hold(src2, b.lease())
		e1 := b.commit(src1, execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		result, entered := b.gate(entryName(e1))
		b.scan()
		<-entered
		e2 := b.commit(src2, execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		b.scan()
		require.Equal(t, 2, b.held())
		b.s.lose(h1, errLeaseLost)
		result <- context.Canceled
		settleUntil(t, func() bool { return b.held() == 0 }, "e1 and e2 released")
		assert.Equal(t, []string{entryName(e1)}, b.handled(), "e2 was not handed out behind the released e1")
		_ = e2
	})
}

// poisonAck is a store whose ack of one entry always fails.
type poisonAck struct {
	execstore.Store
	mu     sync.Mutex
	seq    int64
	failed int
}

func (p *poisonAck) AckOutbox(ctx context.Context, source string, seq int64) error {
	p.mu.Lock()
	if seq == p.seq {
		p.failed++
		p.mu.Unlock()
		return errors.New("poisoned")
	}
	p.mu.Unlock()
	return p.Store.AckOutbox(ctx, source, seq)
}

// poisonedAck is a harness whose relay holds S's partition, with retries an hour apart, and
// an entry of S whose ack always fails: the first failure has happened.
func poisonedAck(t *testing.T) (*harness[execstore.OutboxEntry, entryKey], *poisonAck, *hold, *wake.Committed) {
	var poison *poisonAck
	b := newHarness(t, func(s execstore.Store) kind[execstore.OutboxEntry, entryKey] {
		poison = &poisonAck{Store: s, seq: -1}
		return outboxKind{store: poison}
	}, Options{})
	b.r.opts.RetryMin, b.r.opts.RetryMax = time.Hour, time.Hour
	h := b.hold("S", b.lease())
	e1 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
	poison.mu.Lock()
	poison.seq = e1.Outbox[0].Seq
	poison.mu.Unlock()
	b.scan()
	settleUntil(t, func() bool { return b.r.stats.ackErrors.Load() == 1 }, "the poisoned ack failed")
	return b, poison, h, e1
}

// A failed ack waits for its own back-off: an ack after it is sent at once. Once its hold
// is handed over, it is given up after ackGiveUp tries, so the hand-over is not held up.
// In virtual time.
func TestFailedAckWaitsAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, poison, h, e1 := poisonedAck(t)
		e2 := b.emit("S", "V", false)
		settleUntil(t, func() bool { return b.r.stats.acked.Load() == 1 },
			"the next ack went out without waiting for the failed one's back-off")
		p, err := b.store.PendingOutbox(context.Background(), 0)
		require.NoError(t, err)
		require.Len(t, p, 1)
		assert.Equal(t, e1.Outbox[0].Seq, p[0].Seq)
		assert.NotEqual(t, e2.Outbox[0].Seq, p[0].Seq)

		b.s.mu.Lock()
		h.state = holdDraining
		require.Len(t, b.s.fl.settleQ, 1)
		b.s.fl.settleQ[0].notBefore = time.Time{}
		b.s.mu.Unlock()
		b.r.opts.RetryMin, b.r.opts.RetryMax = time.Millisecond, time.Millisecond
		b.s.mu.Lock()
		b.s.fl.settleQ[0].notBefore = time.Time{}
		b.s.mu.Unlock()
		poke(b.s.settleWake)
		settleUntil(t, func() bool { return b.held() == 0 }, "given up: the hold drains")
		poison.mu.Lock()
		defer poison.mu.Unlock()
		assert.Equal(t, ackGiveUp, poison.failed)
		assert.Equal(t, 1, len(p))
	})
}

// A failed ack that reached a long back-off while its hold was active is tried again at once
// when the hold stops (here its lease is lost), then every drainRetry, and given up after
// ackGiveUp tries: the back-off of an hour does not hold the partition. In virtual time.
func TestFailedAckHurriedOnceItsHoldStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, poison, h, _ := poisonedAck(t)
		b.s.lose(h, errLeaseLost)
		settleUntil(t, func() bool { return b.held() == 0 }, "given up within a few drainRetry")
		poison.mu.Lock()
		defer poison.mu.Unlock()
		assert.Equal(t, ackGiveUp, poison.failed)
	})
}

func newTimerHarness(t *testing.T) *harness[execstore.DueTimer, timerKey] {
	return newHarness(t, func(s execstore.Store) kind[execstore.DueTimer, timerKey] { return timerKind{store: s} }, Options{})
}

// A timer read ahead waits in memory; another process cancels it before its fire time. It
// does not fire: the scan that confirms it, sent after its fire time, does not return it.
// In virtual time.
func TestTimerCancelledElsewhereBeforeItsFireTimeDoesNotFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTimerHarness(t)
		b.hold("X", b.lease())
		fire := time.Now().Add(200 * time.Millisecond)
		b.commit("X", execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
		b.scan()
		require.Equal(t, 1, b.held(), "read ahead, waiting for its fire time")
		b.commit("X", execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("p")}})
		time.Sleep(time.Until(fire))
		b.s.mu.Lock()
		b.s.fireDue()
		b.s.mu.Unlock()
		b.scan()
		assert.Zero(t, b.held())
		assert.Empty(t, b.handled(), "the cancelled timer did not fire")
		assert.EqualValues(t, 1, b.r.stats.cancelled.Load())
	})
}

// A timer handed over by a local commit waits in memory; a later local commit cancels it,
// and its outcome is unknown. The timer does not fire unless the scan that confirms it
// returns it: here it does not, the cancel was applied. In virtual time.
func TestTimerCancelledByACommitOfUnknownOutcomeDoesNotFire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTimerHarness(t)
		b.hold("X", b.lease())
		fire := time.Now().Add(200 * time.Millisecond)
		begun := b.s.Begin("X")
		c := b.commit("X", execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
		c.Timers[0].FireAt = c.Timers[0].FireAt.UTC()
		b.s.End("X", begun, c)
		require.Equal(t, 1, b.held(), "handed over, waiting for its fire time")
		begun = b.s.Begin("X")
		b.commit("X", execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("p")}})
		b.s.End("X", begun, nil)
		time.Sleep(time.Until(fire))
		b.s.mu.Lock()
		b.s.fireDue()
		b.s.mu.Unlock()
		b.scan()
		assert.Zero(t, b.held())
		assert.Empty(t, b.handled(), "the cancelled timer did not fire")

		// One that still stands fires once confirmed.
		fire = time.Now().Add(100 * time.Millisecond)
		b.commit("X", execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("q", fire)}})
		b.scan()
		time.Sleep(time.Until(fire))
		b.s.mu.Lock()
		b.s.fireDue()
		b.s.mu.Unlock()
		b.scan()
		b.settledAll()
		assert.Len(t, b.handled(), 1)
	})
}

// A partition claimed again after the relay's own lease of it ran out is a re-take; one
// whose lapsed lease was another holder's is a take-over. The two are counted apart.
func TestReTakeCountedApartFromTakeOver(t *testing.T) {
	b := newOutboxHarness(t)
	var events []PartitionEvent
	b.r.opts.OnPartition = func(e PartitionEvent) { events = append(events, e) }
	mine := b.lease()
	mine.claimedAt = time.Now().Add(-time.Minute)
	mine.takeOver = false
	h := b.hold("S", mine)
	b.s.lose(h, errLeaseLost)
	p := b.r.partOf("S")

	again := b.lease()
	again.takeOver = true
	b.s.took(p, again, mine.claimedAt) // the lapsed lease it reclaimed was claimed when this relay's was
	other := 0
	for b.r.partOf(fmt.Sprintf("o%d", other)) == p {
		other++
	}
	theirs := b.lease()
	theirs.takeOver = true
	b.s.took(b.r.partOf(fmt.Sprintf("o%d", other)), theirs, time.Now().Add(-time.Second))

	st := b.r.stats.snapshot()
	assert.EqualValues(t, 1, st.ReTakes)
	assert.EqualValues(t, 1, st.TakeOvers)
	require.Len(t, events, 3) // lost, re-taken, taken over
	assert.True(t, events[1].ReTake)
	assert.False(t, events[1].TakeOver)
	assert.True(t, events[2].TakeOver)
	assert.False(t, events[2].ReTake)
}

// heldFail is a DeadLetters store whose Fail waits until the test lets it go.
type heldFail struct {
	execstore.DeadLetters
	entered chan struct{}
	release chan struct{}
}

func (h *heldFail) Fail(ctx context.Context, ref execstore.ItemRef, f execstore.Failure) (execstore.Attempts, bool, error) {
	h.entered <- struct{}{}
	<-h.release
	return h.DeadLetters.Fail(ctx, ref, f)
}

// While e1's failure is being recorded, e1 is still ahead of its execution's later items,
// though its back-off is long over: e2, committed meanwhile, is neither handed over nor
// taken by a scan, and comes after e1's next delivery. In virtual time.
func TestItemsWaitWhileAFailureIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		held := &heldFail{DeadLetters: b.store, entered: make(chan struct{}, 1), release: make(chan struct{})}
		b.r.dead = held
		b.hold("S", b.lease())
		e1 := b.commit("S", execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
		result, entered := b.gate(entryName(e1))
		b.scan()
		<-entered
		result <- errors.New("failed")
		<-held.entered
		time.Sleep(10 * b.r.opts.RetryMax) // the back-off is over
		e2 := b.emit("S", "T", false)
		b.scan()
		assert.Equal(t, 1, b.held(), "only e1 in flight, its failure being recorded")
		close(held.release)
		settleUntil(t, func() bool { return b.held() == 0 }, "e1 released")
		b.scan()
		b.settledAll()
		assert.Equal(t, []string{entryName(e1), entryName(e1), entryName(e2)}, b.handled())
	})
}

// mark is the mark another process's store writes of commit c, carrying its entries when
// carry is set, as it would now: naming the holder's current generation.
func (b *harness[T, K]) mark(c *wake.Committed, seq int64, carry bool) wake.Mark {
	m := markOf(c, seq, carry)
	b.s.mu.Lock()
	m.Gen = b.s.gens.cur
	b.s.mu.Unlock()
	return m
}
