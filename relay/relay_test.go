package relay_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/logtest"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// deliveries records what a relay's handler was given, checks the relay's guarantees on
// every call, and decides each call's result.
type deliveries struct {
	t    *testing.T
	acks []*ackLog // the acks no delivery may follow

	// fail decides a call's result from the entry and the number of earlier calls for it;
	// nil succeeds.
	fail func(e execstore.OutboxEntry, attempt int) error

	mu       sync.Mutex
	attempts map[string]int      // calls per entry (source/seq)
	handled  map[string]int      // calls per entry that returned nil
	order    map[string][]string // events per target, in the order their handler returned nil
	busy     map[string]bool     // targets with a call in progress
	errs     []string            // violations
}

func newDeliveries(t *testing.T, acks ...*ackLog) *deliveries {
	return &deliveries{t: t, acks: acks, attempts: map[string]int{}, handled: map[string]int{},
		order: map[string][]string{}, busy: map[string]bool{}}
}

// handle is the handler. It checks that no other call for the same target is in progress
// and that the entry's ack has not completed.
func (d *deliveries) handle(ctx context.Context, e execstore.OutboxEntry) error {
	id := entryID(e.SourceID, e.Seq)
	d.mu.Lock()
	if d.busy[e.TargetID] {
		d.errs = append(d.errs, fmt.Sprintf("%s: delivered while another entry of target %q was in a handler", id, e.TargetID))
	}
	for _, acks := range d.acks {
		if acks != nil && acks.has(e.SourceID, e.Seq) {
			d.errs = append(d.errs, fmt.Sprintf("%s: delivered after its ack completed", id))
		}
	}
	d.busy[e.TargetID] = true
	attempt := d.attempts[id]
	d.attempts[id]++
	d.mu.Unlock()

	var err error
	if d.fail != nil {
		err = d.fail(e, attempt)
	}
	runtimeYield()

	d.mu.Lock()
	defer d.mu.Unlock()
	d.busy[e.TargetID] = false
	if err == nil {
		d.handled[id]++
		d.order[e.TargetID] = append(d.order[e.TargetID], string(e.Event))
	}
	return err
}

// runtimeYield gives other lanes a chance to overlap, were they allowed to.
func runtimeYield() { time.Sleep(50 * time.Microsecond) }

// check fails t on any violation seen.
func (d *deliveries) check() {
	d.mu.Lock()
	defer d.mu.Unlock()
	assert.Empty(d.t, d.errs)
}

// Every pending entry is delivered and acked, each handed to the handler once when nothing
// fails, and each target's entries in commit order.
func TestDeliversAndAcks(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		const targets, each = 5, 12
		em := newEmitter(t, store)
		want := map[string][]string{}
		for i := range each {
			for j := range targets {
				target := fmt.Sprintf("t%d", j)
				ev := fmt.Sprintf("%s-%d", target, i)
				em.emit(fmt.Sprintf("s%d", j), target, ev)
				want[target] = append(want[target], ev)
			}
		}
		p := newProbe(t, store, nil)
		d := newDeliveries(t, p.acks)
		r := relay.New(p, d.handle, relay.Options{Lanes: 3, Batch: 7})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Acked == targets*each }, "every entry acked")
		require.NoError(t, stop())
		d.check()
		assert.Equal(t, want, d.order)
		for id, n := range d.attempts {
			assert.Equal(t, 1, n, "%s handed out %d times", id, n)
		}
		assert.Zero(t, pending(t, store))
		st := r.Stats()
		assert.EqualValues(t, targets*each, st.Delivered)
		assert.Zero(t, st.HandlerErrors)
		assert.Zero(t, st.InFlight)
		assert.False(t, st.Holding)
		assert.Positive(t, st.Scans)
	})
}

// A handler that fails leaves its entry pending: it is delivered again after a back-off until
// it succeeds, and only then acked; the target's later entries wait for it, so each target's
// entries still succeed in commit order, never two at once; the other targets go on.
func TestAtLeastOnceWithFailingHandlers(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		const targets, each = 6, 10
		em := newEmitter(t, store)
		want := map[string][]string{}
		for i := range each {
			for j := range targets {
				target := fmt.Sprintf("t%d", j)
				ev := fmt.Sprintf("%s-%d", target, i)
				em.emit("s"+target, target, ev)
				want[target] = append(want[target], ev)
			}
		}
		p := newProbe(t, store, nil)
		d := newDeliveries(t, p.acks)
		boom := errors.New("handler failed")
		// Every third entry fails twice; target t0's entries fail once each.
		d.fail = func(e execstore.OutboxEntry, attempt int) error {
			if (e.Seq%3 == 0 && attempt < 2) || (e.TargetID == "t0" && attempt < 1) {
				return boom
			}
			return nil
		}
		var reported atomic.Int64
		r := relay.New(p, d.handle, relay.Options{Lanes: 4, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
			OnError: func(err error) {
				var re *relay.Error
				if errors.As(err, &re) && re.Op == relay.OpHandle && errors.Is(err, boom) {
					reported.Add(1)
				}
			}})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Acked == targets*each }, "every entry acked")
		require.NoError(t, stop())
		d.check()
		assert.Equal(t, want, d.order, "each target's entries succeeded once each, in commit order")
		st := r.Stats()
		assert.Positive(t, st.HandlerErrors)
		assert.Equal(t, st.HandlerErrors, reported.Load(), "every handler error reported")
		assert.Equal(t, st.Delivered, st.HandlerErrors+targets*each)
		for id, n := range d.handled {
			assert.Equal(t, 1, n, "%s succeeded %d times", id, n)
		}
		assert.Zero(t, pending(t, store))
	})
}

// Many targets over few lanes, entries committed while the relay runs: a target's entries
// are never handled at once, and succeed in commit order.
func TestPerTargetExclusivityUnderLoad(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = store.Close(bg) })
		const targets, each, writers = 40, 30, 4
		p := newProbe(t, store, nil)
		d := newDeliveries(t, p.acks)
		d.fail = func(e execstore.OutboxEntry, attempt int) error {
			if e.Seq%11 == 0 && attempt == 0 {
				return errors.New("once")
			}
			return nil
		}
		r := relay.New(p, d.handle, relay.Options{Lanes: 8, Batch: 16, RetryMin: time.Millisecond, RetryMax: 2 * time.Millisecond})
		stop := run(t, r)
		em := newEmitter(t, store)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				for i := range each {
					for j := w; j < targets; j += writers {
						target := fmt.Sprintf("t%d", j)
						em.emit("s"+target, target, fmt.Sprintf("%03d", i))
					}
				}
			})
		}
		wg.Wait()
		settleUntil(t, func() bool { return r.Stats().Acked == targets*each }, "every entry acked")
		require.NoError(t, stop())
		d.check()
		for target, events := range d.order {
			require.Len(t, events, each, target)
			for i, ev := range events {
				assert.Equal(t, fmt.Sprintf("%03d", i), ev, "%s's entries in commit order", target)
			}
		}
	})
}

// A commit through a store of this process hands its entry over to a relay whose poll
// interval is an hour: the entry is delivered with no scan but the first one.
func TestHandOver(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		if wake.Of(store) == nil {
			t.Skipf("%T registers no wake-up signal: its relays only poll", store)
		}
		d := newDeliveries(t)
		r := relay.New(store, d.handle, relay.Options{PollInterval: time.Hour})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Scans >= 1 }, "the first scan")
		em := newEmitter(t, store)
		for i := range 3 {
			em.emit("s", "t", fmt.Sprint(i))
			settleUntil(t, func() bool { return r.Stats().Acked == int64(i+1) }, "entry %d handed over", i)
		}
		require.NoError(t, stop())
		st := r.Stats()
		assert.EqualValues(t, 3, st.HandedOver)
		assert.EqualValues(t, 1, st.Scans, "no scan after the first")
		assert.Zero(t, st.Wakeups)
		d.check()
	})
}

// A store with no wake-up signal is polled.
func TestPollsWithoutWakeUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = store.Close(bg) })
		var polled execstore.Store = struct{ execstore.Store }{store} // registers nothing
		require.Nil(t, wake.Of(polled))
		d := newDeliveries(t)
		r := relay.New(polled, d.handle, relay.Options{PollInterval: 20 * time.Millisecond})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Scans >= 1 }, "the first scan")
		newEmitter(t, store).emit("s", "t", "x")
		settleUntil(t, func() bool { return r.Stats().Acked == 1 }, "delivered by a poll")
		require.NoError(t, stop())
		assert.Zero(t, r.Stats().Wakeups)
	})
}

// The scan/ack race: a scan that began before an ack completed, and whose answer comes back
// after the relay recorded that ack, still holds the acked entry, no longer in flight. The
// relay must not hand it out again. Batch 1 makes the relay scan again while the first entry
// is in flight; the probe holds every scan's answer back until the relay has recorded an ack
// since the scan read the store.
func TestScanOlderThanAck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = store.Close(bg) })
		em := newEmitter(t, store)
		const n = 20
		for i := range n {
			em.emit("s", fmt.Sprintf("t%d", i%3), fmt.Sprint(i))
		}
		p := newProbe(t, store, nil)
		var r atomic.Pointer[relay.Relay]
		var stale atomic.Int64
		p.afterScan = func() {
			// The answer is read; wait for the relay to record the next ack (or for a while, when
			// none is coming), then return the answer, older than that ack.
			before := r.Load().Stats().Acked
			deadline := time.Now().Add(200 * time.Millisecond)
			for r.Load().Stats().Acked == before && time.Now().Before(deadline) {
				time.Sleep(100 * time.Microsecond)
			}
			if r.Load().Stats().Acked != before {
				stale.Add(1)
			}
		}
		d := newDeliveries(t, p.acks)
		r.Store(relay.New(p, d.handle, relay.Options{Batch: 1, Lanes: 2}))
		stop := run(t, r.Load())
		settleUntil(t, func() bool { return r.Load().Stats().Acked >= n && pending(t, store) == 0 }, "every entry acked")
		require.NoError(t, stop())
		d.check()
		for id, k := range d.attempts {
			assert.Equal(t, 1, k, "%s handed out %d times", id, k)
		}
		assert.Positive(t, stale.Load(), "some scan's answer was older than an ack")
		assert.Positive(t, r.Load().Stats().Skipped)
	})
}

// ErrLeavePending leaves the entry pending without an error: it is withheld until the handler
// lets it through, and acked only then.
func TestLeavePending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = store.Close(bg) })
		em := newEmitter(t, store)
		em.emit("s", "held", "h")
		em.emit("s2", "free", "f")
		var release atomic.Bool
		d := newDeliveries(t)
		d.fail = func(e execstore.OutboxEntry, _ int) error {
			if e.TargetID == "held" && !release.Load() {
				return fmt.Errorf("not yet: %w", relay.ErrLeavePending)
			}
			return nil
		}
		r := relay.New(store, d.handle, relay.Options{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
			OnError: func(err error) { t.Errorf("reported: %v", err) }})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Withheld >= 3 && r.Stats().Acked == 1 }, "withheld, and the other acked")
		assert.Equal(t, 1, pending(t, store))
		release.Store(true)
		settleUntil(t, func() bool { return r.Stats().Acked == 2 }, "acked once let through")
		require.NoError(t, stop())
		assert.Zero(t, r.Stats().HandlerErrors)
	})
}

// Close lets the handlers in flight finish, without cancelling their context, and acks what
// they finished; a Close whose context ends first cancels them and returns its error.
func TestCloseWaitsForHandlers(t *testing.T) {
	for _, patient := range []bool{true, false} {
		t.Run(fmt.Sprintf("patient=%v", patient), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New(memstore.Options{})
				t.Cleanup(func() { _ = store.Close(bg) })
				newEmitter(t, store).emit("s", "t", "x")
				entered, unblock := make(chan struct{}), make(chan struct{})
				var cancelled atomic.Bool
				r := relay.New(store, func(ctx context.Context, e execstore.OutboxEntry) error {
					close(entered)
					select {
					case <-unblock:
						return nil
					case <-ctx.Done():
						cancelled.Store(true)
						return ctx.Err()
					}
				}, relay.Options{})
				res := make(chan error, 1)
				go func() { res <- r.Run(bg) }()
				<-entered

				if patient {
					closed := make(chan error, 1)
					go func() { closed <- r.Close(bg) }()
					synctest.Wait() // Close runs until it blocks
					select {
					case err := <-closed:
						t.Fatalf("Close returned (%v) while a handler was in flight", err)
					default:
					}
					close(unblock)
					require.NoError(t, <-closed)
					require.NoError(t, <-res)
					assert.False(t, cancelled.Load())
					assert.EqualValues(t, 1, r.Stats().Acked)
					assert.Zero(t, pending(t, store))
				} else {
					ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
					defer cancel()
					require.ErrorIs(t, r.Close(ctx), context.DeadlineExceeded)
					require.NoError(t, <-res)
					assert.True(t, cancelled.Load())
					assert.Zero(t, r.Stats().Acked)
					assert.Equal(t, 1, pending(t, store), "the entry stays pending")
				}
				assert.ErrorIs(t, r.Run(bg), execstore.ErrClosed)
				assert.NoError(t, r.Close(bg), "closing again")
			})
		})
	}
}

// Run's results: nil when its context ends, ErrRunning beside another Run, ErrClosed after
// Close, and an error matching execstore.ErrClosed when the store closes under it.
func TestRunResults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{})
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil }, relay.Options{})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Scans >= 1 }, "running")
		assert.ErrorIs(t, r.Run(bg), relay.ErrRunning)
		require.NoError(t, stop())

		stop = run(t, r) // a relay runs again after its Run returned
		settleUntil(t, func() bool { return r.Stats().Scans >= 2 }, "running again")
		require.NoError(t, stop())

		require.NoError(t, r.Close(bg))
		assert.ErrorIs(t, r.Run(bg), execstore.ErrClosed)

		// A relay whose store closes under it returns by itself, at its next scan.
		polling := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil },
			relay.Options{PollInterval: 5 * time.Millisecond})
		res := make(chan error, 1)
		go func() { res <- polling.Run(bg) }()
		settleUntil(t, func() bool { return polling.Stats().Scans >= 1 }, "running")
		require.NoError(t, store.Close(bg))
		var err error
		select {
		case err = <-res:
		case <-time.After(waitLong):
			t.Fatal("Run did not return after its store closed")
		}
		var re *relay.Error
		require.ErrorAs(t, err, &re)
		assert.ErrorIs(t, err, execstore.ErrClosed)
		assert.Equal(t, relay.OpScan, re.Op)

		assert.Panics(t, func() {
			relay.New(nil, func(context.Context, execstore.OutboxEntry) error { return nil }, relay.Options{})
		})
		assert.Panics(t, func() { relay.New(store, nil, relay.Options{}) })
	})
}

// ScanGap gathers the wake-ups of a stream of commits into fewer scans: with a gap longer
// than the whole stream, the commits made while a scan is owed are picked up by one scan
// after the gap, not one scan each; every entry is still delivered.
func TestScanGapGathersWakeUps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		d := newDeliveries(t)
		em := newEmitter(t, store)
		const sources = 20
		for i := range sources { // before the relay runs, with nothing to relay: no scan sees them
			em.commit(fmt.Sprint("s", i), execstore.Commit{})
		}
		r := relay.New(store, d.handle, relay.Options{PollInterval: time.Hour, ScanGap: 2 * time.Second})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Scans == 1 }, "the first scan")
		for i := range sources {
			// The relay does not know what the source wrote before: the entry is not handed
			// over, and the relay owes a scan.
			em.emit(fmt.Sprint("s", i), fmt.Sprint("t", i), "second")
			time.Sleep(5 * time.Millisecond) // each commit a wake-up of its own, without the gap
		}
		settleUntil(t, func() bool { return r.Stats().Acked == sources }, "every entry delivered")
		for i := range sources { // now the relay knows them: handed over
			em.emit(fmt.Sprint("s", i), fmt.Sprint("t", i), "third")
		}
		settleUntil(t, func() bool { return r.Stats().Acked == 2*sources }, "every entry delivered")
		require.NoError(t, stop())
		st := r.Stats()
		assert.LessOrEqual(t, st.Scans, int64(3), "one scan at the start, then one per gap: %+v", st)
		assert.EqualValues(t, sources, st.Wakeups)
		assert.EqualValues(t, sources, st.HandedOver)
		d.check()
	})
}

// Run's context cancelled with a cause, even one that wraps a relay *Error, ends Run
// cleanly: the cause is the caller's, not a failure of the relay's.
func TestRunContextCauseIsTheCallers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		d := newDeliveries(t)
		r := relay.New(store, d.handle, relay.Options{PollInterval: time.Hour})
		ctx, cancel := context.WithCancelCause(bg)
		ran := make(chan error, 1)
		go func() { ran <- r.Run(ctx) }()
		settleUntil(t, func() bool { return r.Stats().Scans >= 1 }, "the first scan")
		cancel(fmt.Errorf("the caller gave up: %w", &relay.Error{Op: relay.OpHandle, Err: errors.New("boom")}))
		require.NoError(t, <-ran)
		require.NoError(t, r.Close(bg))
	})
}

// ScanGap gathers acks too: handlers returning one after the other, faster than the gap,
// have their entries acked in few batches, not one ack batch each; every entry is acked.
func TestScanGapGathersAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &ackCounter{Store: newMemstore(t)}
		wake.Register(store, wake.Of(store.Store))
		t.Cleanup(func() { wake.Unregister(store) })
		em := newEmitter(t, store.Store)
		const entries = 20
		for i := range entries {
			em.emit("s", "t", fmt.Sprint(i)) // one target: one lane, handled one after the other
		}
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error {
			time.Sleep(5 * time.Millisecond)
			return nil
		}, relay.Options{PollInterval: time.Hour, ScanGap: 2 * time.Second})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Acked == entries }, "every entry acked")
		require.NoError(t, stop())
		assert.LessOrEqual(t, store.batches.Load(), int64(3), "acks of 100 ms of handling, gathered over a 2 s gap")
	})
}

// ackCounter counts the batches of acks a relay sends: acks that start while none is under
// way open a new batch.
type ackCounter struct {
	execstore.Store
	busy    atomic.Int64
	batches atomic.Int64
}

func (c *ackCounter) AckOutbox(ctx context.Context, source string, seq int64) error {
	if c.busy.Add(1) == 1 {
		c.batches.Add(1)
	}
	defer c.busy.Add(-1)
	time.Sleep(time.Millisecond) // the acks of one batch overlap
	return c.Store.AckOutbox(ctx, source, seq)
}

// A handler that panics fails the delivery as an error would, with the panic's value: the
// relay goes on, the entry is retried and acked once the handler returns nil, and a panic
// with an error wrapping ErrPermanent moves its entry to dead.
func TestHandlerPanicIsAFailedDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		em := newEmitter(t, store)
		em.emit("s", "t", "once")
		em.emit("p", "t", "permanent")
		var mu sync.Mutex
		calls := map[string]int{}
		var reported []error
		var logged logtest.Buffer
		r := relay.New(store, func(_ context.Context, e execstore.OutboxEntry) error {
			mu.Lock()
			calls[e.SourceID]++
			n := calls[e.SourceID]
			mu.Unlock()
			switch {
			case e.SourceID == "p":
				panic(fmt.Errorf("bad event: %w", relay.ErrPermanent))
			case n == 1:
				panic("first try")
			}
			return nil
		}, relay.Options{RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond, OnError: func(err error) {
			mu.Lock()
			defer mu.Unlock()
			reported = append(reported, err)
		}, Logger: slog.New(slog.NewTextHandler(&logged, nil))})
		stop := run(t, r)
		settleUntil(t, func() bool { s := r.Stats(); return s.Acked == 1 && s.Dead == 1 }, "one entry acked, the other dead")
		require.NoError(t, stop())
		mu.Lock()
		defer mu.Unlock()
		assert.Equal(t, 2, calls["s"], "retried once after its panic")
		assert.Equal(t, 1, calls["p"], "dead at its first panic")
		require.Len(t, reported, 2)
		for _, err := range reported {
			assert.ErrorContains(t, err, "the handler panicked")
			var p *relay.PanicError
			require.ErrorAs(t, err, &p)
			assert.NotContains(t, err.Error(), "\n", "one line: the stack is apart")
			assert.Contains(t, string(p.Stack), "relay_test.go", "the handler's stack")

			var line bytes.Buffer
			slog.New(slog.NewTextHandler(&line, nil)).Error("failed", "err", err)
			assert.Contains(t, line.String(), "err.op=handle ")
			assert.Regexp(t, `err\.item="outbox [ps]/[0-9]+"`, line.String(), "the item as the CLI names it")
			assert.Contains(t, line.String(), "err.stack=", "the stack in an attribute of its own")
			assert.NotRegexp(t, `err\.error="[^"]*goroutine`, line.String())
		}
		dead, err := store.ListDead(bg, execstore.DeadQuery{})
		require.NoError(t, err)
		require.Len(t, dead.Items, 1)
		assert.Equal(t, "p", dead.Items[0].ExecutionID)
		assert.Contains(t, dead.Items[0].LastError, "bad event")
		assert.Contains(t, dead.Items[0].LastError, "\ngoroutine ", "the stored failure keeps the stack after its line")
		deadLine := logged.String()
		assert.Regexp(t, `msg="relay: item moved to dead[^\n]* item="outbox p/[0-9]+" attempts=1 error="relay: the handler panicked: bad event: relay: permanent failure, never retry" stack="goroutine `, deadLine)
	})
}
