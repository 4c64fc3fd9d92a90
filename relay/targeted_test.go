package relay

import (
	"context"
	"errors"
	"fmt"
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

// samePartition returns n execution ids of one partition of b's store, the first "S".
func samePartition[T any, K comparable](b *harness[T, K], n int) []string {
	ids := []string{"S"}
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprintf("S%d", i); b.r.partOf(id) == b.r.partOf("S") {
			ids = append(ids, id)
		}
	}
	return ids
}

// A targeted read reads the sources the session left in the store, and learns of those
// alone. S and R share a partition. Another process commits r1 on R and e1 on S; this
// process then commits e2 on S, which is not handed over (S is unknown here). The read owed
// reads S alone: it hands out e1 and e2, in commit order, and not r1, which it did not read.
// R stays unknown: its next local commit r2 is not handed over, and the read it owes hands
// out r1 and r2.
func TestTargetedReadLearnsOfWhatItReadAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		ids := samePartition(b, 2)
		s, r := ids[0], ids[1]
		b.hold(s, b.lease())
		assert.Nil(t, b.read(), "nothing left in the store: the dispatcher scans")
		r1 := b.commit(r, execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("r1")}}})
		e1 := b.commit(s, execstore.Commit{Emits: []execstore.Emit{{TargetID: "U", Event: []byte("e1")}}})
		e2 := b.emit(s, "U", false)
		assert.Zero(t, b.held(), "e2 not handed over: S is unknown")
		assert.Equal(t, []string{s}, b.read())
		b.settledAll()
		assert.Equal(t, []string{entryName(e1), entryName(e2)}, b.handled(), "S's entries, not R's")

		r2 := b.emit(r, "T", false)
		assert.Zero(t, b.held(), "r2 not handed over: R is still unknown")
		assert.Equal(t, []string{r}, b.read())
		b.settledAll()
		assert.Equal(t, []string{entryName(e1), entryName(e2), entryName(r1), entryName(r2)}, b.handled())
		e3 := b.emit(s, "U", false)
		// No read follows: e3 reaches its handler only by being handed over. Its handler may
		// have returned already, so the test waits for the call rather than counting what is
		// in flight.
		settleUntil(t, func() bool { return len(b.handled()) == 5 }, "S is known: e3 handed over")
		b.settledAll()
		assert.Equal(t, entryName(e3), b.handled()[4])
		assert.EqualValues(t, 2, b.r.stats.targeted.Load())
	})
}

// A targeted read answered while the lease is not live teaches nothing, as a scan does: S
// stays soiled, its next commit is not handed over ahead of e1, and the next read returns
// both, in commit order.
func TestTargetedReadWhileTheLeaseIsNotLiveTeachesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		ls := b.lease()
		b.hold("S", ls)
		pause(ls)
		e1 := b.emit("S", "T", false)
		b.s.mu.Lock()
		parts, holds := b.s.scannable()
		// Sent before the pause, as the dispatcher would have: the hold is in the read's holds.
		for p, h := range b.s.holds {
			if holds[p] == nil {
				parts = append(parts, p)
				holds[p] = h
			}
		}
		targets := b.s.targets(holds)
		b.s.mu.Unlock()
		require.Equal(t, map[string]bool{"S": true}, targets)
		_, _, err := b.s.scan(parts, holds, targets, b.r.opts.Clock())
		require.NoError(t, err)
		assert.Zero(t, b.held(), "nothing handed out while the lease is not live")
		resume(ls)
		e2 := b.emit("S", "T", false)
		assert.Zero(t, b.held(), "e2 not handed over while e1 is pending in the store")
		assert.Equal(t, []string{"S"}, b.read())
		b.settledAll()
		assert.Equal(t, []string{entryName(e1), entryName(e2)}, b.handled())
	})
}

// An item released by its handler's failure soils its source: the read owed once its
// execution's back-off is over reads that source, and delivers the item again ahead of the
// execution's later item, which a local commit made meanwhile (not handed over).
func TestTargetedReadDeliversAReleasedItemAgainFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		b.hold("S", b.lease())
		e1 := b.failOnce("S", "T")
		e2 := b.emit("S", "T", false)
		assert.Zero(t, b.held(), "e2 not handed over ahead of e1")
		time.Sleep(10 * time.Millisecond) // the back-off (RetryMax 5ms)
		assert.Equal(t, []string{"S"}, b.read())
		b.settledAll()
		assert.Equal(t, []string{entryName(e1), entryName(e1), entryName(e2)}, b.handled())
	})
}

// A timer read ahead and come due is confirmed by a targeted read of its execution, sent
// after its fire time: one another process cancelled meanwhile is dropped, not fired; one
// that stands fires. Each read reads only the executions of the timers come due.
func TestTargetedReadConfirmsTimersComeDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newTimerHarness(t)
		ids := samePartition(b, 2)
		x, y := ids[0], ids[1]
		b.hold(x, b.lease())
		fire := time.Now().Add(150 * time.Millisecond)
		b.commit(x, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
		b.commit(y, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("q", fire.Add(time.Hour))}})
		b.scan()
		require.Equal(t, 1, b.held(), "x's timer read ahead, waiting for its fire time")
		b.commit(x, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("p")}})
		time.Sleep(time.Until(fire))
		b.s.mu.Lock()
		b.s.fireDue()
		b.s.mu.Unlock()
		assert.Equal(t, []string{x}, b.read(), "the read confirms x's timer alone")
		assert.Zero(t, b.held())
		assert.Empty(t, b.handled(), "the cancelled timer did not fire")
		assert.EqualValues(t, 1, b.r.stats.cancelled.Load())

		fire = time.Now().Add(100 * time.Millisecond)
		b.commit(x, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("r", fire)}})
		b.scan()
		time.Sleep(time.Until(fire))
		b.s.mu.Lock()
		b.s.fireDue()
		b.s.mu.Unlock()
		assert.Equal(t, []string{x}, b.read())
		b.settledAll()
		require.Len(t, b.handled(), 1, "the timer that stands fires, once confirmed")
		assert.Contains(t, b.handled()[0], x+` "r" at `)
	})
}

// notTargeted hides a store's targeted reads.
type notTargeted struct{ execstore.Partitioned }

// A relay whose handler fails one delivery in four once delivers every entry exactly once
// more than it failed, in commit order per source. Over a store with targeted reads it
// re-reads the failed entries' sources by their ids, not its partitions; over the same store
// with them hidden, it scans.
func TestRelayRereadsWhatItLeftBehind(t *testing.T) {
	for _, targeted := range []bool{true, false} {
		t.Run(fmt.Sprint("targeted=", targeted), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New(memstore.Options{})
				t.Cleanup(func() { _ = store.Close(context.Background()) })
				var relayed execstore.Store = store
				if !targeted {
					relayed = notTargeted{store}
					wake.Register(relayed, wake.Of(store)) // its commits are handed over as the store's
					t.Cleanup(func() { wake.Unregister(relayed) })
				}
				const sources, each = 8, 12
				var mu sync.Mutex
				got := map[string][]string{} // by source, in delivery order
				failed := map[string]bool{}
				calls := 0
				r := New(relayed, func(_ context.Context, e execstore.OutboxEntry) error {
					mu.Lock()
					defer mu.Unlock()
					calls++
					key := fmt.Sprint(e.SourceID, "/", e.Seq)
					if e.Seq%4 == 0 && !failed[key] {
						failed[key] = true
						return errors.New("fails once")
					}
					got[e.SourceID] = append(got[e.SourceID], string(e.Event))
					return nil
				}, Options{PollInterval: time.Hour, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond, OnError: func(error) {}})
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- r.Run(ctx) }()
				exes := make([]*execstore.Execution, sources)
				for i := range exes {
					exes[i] = &execstore.Execution{ID: fmt.Sprint("src", i), DefinitionID: "d", Status: execstore.Running}
				}
				for n := range each {
					for _, e := range exes {
						_, err := store.Commit(context.Background(), e, execstore.Commit{
							Emits: []execstore.Emit{{TargetID: e.ID, Event: fmt.Appendf(nil, "%02d", n)}}})
						require.NoError(t, err)
					}
				}
				settleUntil(t, func() bool { return r.Stats().Acked == sources*each }, "every entry acked")
				cancel()
				require.NoError(t, <-done)
				mu.Lock()
				defer mu.Unlock()
				for _, e := range exes {
					want := make([]string, each)
					for n := range want {
						want[n] = fmt.Sprintf("%02d", n)
					}
					assert.Equal(t, want, got[e.ID], "source %s: each entry once, in commit order", e.ID)
				}
				assert.Equal(t, sources*each+len(failed), calls)
				require.NotEmpty(t, failed)
				st := r.Stats()
				if targeted {
					assert.Positive(t, st.Targeted, "the failed entries' sources re-read by id")
					assert.Less(t, st.Scans-st.Targeted, int64(len(failed)), "fewer scans of the partitions than failures")
				} else {
					assert.Zero(t, st.Targeted)
				}
			})
		})
	}
}
