package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/relay"
)

// nowFireTime is the current time as a fire time that comes back from a store unchanged:
// in UTC, to the microsecond.
func nowFireTime() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// lastFireTime is the latest fire time a store accepts: every timer is due by then.
var lastFireTime = time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)

// firings records what a sweeper's handler was given and checks, on every call, that no
// other call for the same execution is in progress.
type firings struct {
	t    *testing.T
	fail func(tm execstore.DueTimer, attempt int) error

	mu       sync.Mutex
	attempts map[execstore.DueTimer]int
	fired    map[execstore.DueTimer]int // calls that returned nil
	busy     map[string]bool
	errs     []string
	// then, when set, runs after a call that returned nil, outside the lock.
	then func(tm execstore.DueTimer)
}

func newFirings(t *testing.T) *firings {
	return &firings{t: t, attempts: map[execstore.DueTimer]int{}, fired: map[execstore.DueTimer]int{}, busy: map[string]bool{}}
}

func (f *firings) handle(ctx context.Context, tm execstore.DueTimer) error {
	tm.Attempts, tm.Version = execstore.Attempts{}, 0 // a timer is known by its execution, path and fire time
	f.mu.Lock()
	if f.busy[tm.ExecutionID] {
		f.errs = append(f.errs, fmt.Sprintf("%v: fired while another timer of its execution was in a handler", tm))
	}
	if tm.FireAt.After(time.Now()) {
		f.errs = append(f.errs, fmt.Sprintf("%v: fired before its time", tm))
	}
	f.busy[tm.ExecutionID] = true
	attempt := f.attempts[tm]
	f.attempts[tm]++
	f.mu.Unlock()

	var err error
	if f.fail != nil {
		err = f.fail(tm, attempt)
	}
	runtimeYield()

	f.mu.Lock()
	f.busy[tm.ExecutionID] = false
	if err == nil {
		f.fired[tm]++
	}
	then := f.then
	f.mu.Unlock()
	if err == nil && then != nil {
		then(tm)
	}
	return err
}

func (f *firings) check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(f.t, f.errs)
}

// timers returns every timer the store holds.
func timers(t *testing.T, store execstore.Store) []execstore.DueTimer {
	t.Helper()
	all, err := store.DueTimers(bg, lastFireTime, 0)
	require.NoError(t, err)
	for i := range all {
		all[i].Version = 0 // compared by execution, path and fire time
	}
	return all
}

// Due timers are fired once each and deleted; a timer due later than the sweeper's first
// look, but within its look ahead, is fired when it comes due with no poll (the poll interval
// is an hour); a timer past the look ahead is left alone.
func TestSweeperFiresDueTimers(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		em := newEmitter(t, store)
		now := nowFireTime()
		var due []execstore.DueTimer
		for i := range 8 {
			exe := fmt.Sprintf("x%d", i%3)
			path := fmt.Sprintf("P%d", i)
			fireAt := now.Add(-time.Duration(10-i) * time.Second)
			if i >= 6 {
				fireAt = now.Add(300 * time.Millisecond) // comes due soon after the first look
			}
			em.schedule(exe, path, fireAt)
			due = append(due, execstore.DueTimer{ExecutionID: exe, Path: path, FireAt: fireAt})
		}
		far := execstore.DueTimer{ExecutionID: "x0", Path: "Far", FireAt: now.Add(2 * time.Hour)}
		em.schedule(far.ExecutionID, far.Path, far.FireAt)

		f := newFirings(t)
		sw := relay.NewSweeper(newProbe(t, store, nil), f.handle, relay.Options{PollInterval: time.Hour, Lanes: 2})
		stop := run(t, sw)
		settleUntil(t, func() bool { return sw.Stats().Acked == int64(len(due)) }, "every due timer fired and deleted")
		require.NoError(t, stop())
		f.check()
		for _, tm := range due {
			assert.Equal(t, 1, f.fired[tm], "%v", tm)
		}
		assert.Len(t, f.attempts, len(due))
		assert.Equal(t, []execstore.DueTimer{far}, timers(t, store))
	})
}

// A handler that re-arms the timer it fires (same path, a new time) keeps the new one: the
// sweep's delete is guarded by the fire time it fired.
func TestSweeperKeepsRescheduledTimer(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		em := newEmitter(t, store)
		now := nowFireTime()
		em.schedule("x", "Remind", now.Add(-time.Second))
		f := newFirings(t)
		later := now.Add(time.Hour)
		f.then = func(tm execstore.DueTimer) { em.schedule(tm.ExecutionID, tm.Path, later) }
		sw := relay.NewSweeper(store, f.handle, relay.Options{})
		stop := run(t, sw)
		settleUntil(t, func() bool { return sw.Stats().Acked == 1 }, "fired and deleted")
		require.NoError(t, stop())
		f.check()
		assert.Equal(t, []execstore.DueTimer{{ExecutionID: "x", Path: "Remind", FireAt: later}}, timers(t, store))
	})
}

// A timer armed by a commit through a store of this process is handed over to a sweeper
// whose poll interval is an hour: one due at once is fired at once; one due a little later
// waits in memory and is fired when it comes due, once the one look sent after its fire time
// confirmed it still stands: two looks in all.
func TestSweeperHandOver(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		if wake.Of(store) == nil {
			t.Skipf("%T registers no wake-up signal: its sweepers only poll", store)
		}
		f := newFirings(t)
		sw := relay.NewSweeper(store, f.handle, relay.Options{PollInterval: time.Hour})
		stop := run(t, sw)
		settleUntil(t, func() bool { return sw.Stats().Scans >= 1 }, "the first look")
		em := newEmitter(t, store)
		em.schedule("x", "Now", nowFireTime().Add(-time.Second))
		settleUntil(t, func() bool { return sw.Stats().Acked == 1 }, "the due timer handed over and fired")
		// Due 2s after it is armed: a commit and its hand-over end well before on a busy machine
		// (200ms left a slow commit little room), so the timer waits in memory for its fire time and
		// its confirming look.
		em.schedule("y", "Soon", nowFireTime().Add(2*time.Second))
		settleUntil(t, func() bool { return sw.Stats().Acked == 2 }, "the timer due soon fired")
		require.NoError(t, stop())
		assert.EqualValues(t, 2, sw.Stats().HandedOver)
		assert.EqualValues(t, 2, sw.Stats().Scans, "the first look, and the one that confirmed the timer due soon")
		f.check()
		assert.Empty(t, timers(t, store))
	})
}

// More timers handed over than a Batch wait in memory for their fire time, then for the read
// that confirms them: that read is sent though they are in flight, since only it can let
// them go. With Batch 2 and no poll, twelve timers due together all fire (before, the
// sweeper held 2×Batch of them unconfirmed and sent no read while more than Batch were in
// flight: it stalled).
func TestSweeperConfirmsMoreTimersThanABatch(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		if wake.Of(store) == nil {
			t.Skipf("%T registers no wake-up signal: its sweepers only poll", store)
		}
		f := newFirings(t)
		sw := relay.NewSweeper(store, f.handle, relay.Options{PollInterval: time.Hour, Batch: 2})
		stop := run(t, sw)
		settleUntil(t, func() bool { return sw.Stats().Scans >= 1 }, "the first look")
		em := newEmitter(t, store)
		fire := nowFireTime().Add(300 * time.Millisecond)
		const n = 12
		for i := range n {
			em.schedule(fmt.Sprintf("x%02d", i), "Soon", fire)
		}
		settleUntil(t, func() bool { return sw.Stats().Acked == n }, "every timer fired")
		require.NoError(t, stop())
		assert.GreaterOrEqual(t, sw.Stats().HandedOver, int64(4), "2×Batch handed over")
		f.check()
		assert.Empty(t, timers(t, store))
	})
}

// A failing handler leaves its timer in place; it is fired again after a back-off and
// deleted only once its handler returned nil. The execution's other timers wait for it.
func TestSweeperRetries(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		em := newEmitter(t, store)
		now := nowFireTime()
		for i := range 6 {
			em.schedule(fmt.Sprintf("x%d", i%2), fmt.Sprintf("P%d", i), now.Add(-time.Duration(6-i)*time.Second))
		}
		f := newFirings(t)
		boom := errors.New("not now")
		f.fail = func(tm execstore.DueTimer, attempt int) error {
			if attempt < 2 {
				return boom
			}
			return nil
		}
		var order []string
		var mu sync.Mutex
		f.then = func(tm execstore.DueTimer) {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, tm.ExecutionID+"/"+tm.Path)
		}
		sw := relay.NewSweeper(store, f.handle, relay.Options{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
		stop := run(t, sw)
		settleUntil(t, func() bool { return sw.Stats().Acked == 6 }, "every timer fired and deleted")
		require.NoError(t, stop())
		f.check()
		assert.EqualValues(t, 12, sw.Stats().HandlerErrors)
		for tm, n := range f.fired {
			assert.Equal(t, 1, n, "%v", tm)
		}
		var x0, x1 []string
		for _, o := range order {
			if o[:2] == "x0" {
				x0 = append(x0, o)
			} else {
				x1 = append(x1, o)
			}
		}
		assert.Equal(t, []string{"x0/P0", "x0/P2", "x0/P4"}, x0, "each execution's timers in fire-time order")
		assert.Equal(t, []string{"x1/P1", "x1/P3", "x1/P5"}, x1)
		assert.Empty(t, timers(t, store))
	})
}

// Sweepers take a lease of their own (the default keys differ), beside the relays': a relay
// and a sweeper on one lease store both run; of two sweepers one fires, and the other takes
// over when it dies.
func TestSweeperStandbyTakesOver(t *testing.T) {
	eachLeaseBackend(t, func(t *testing.T, store execstore.Store, another func() execstore.Store, open leasesOpener) {
		leasesA, dieA := open()
		leasesB, _ := open()
		pA, pB := newProbe(t, unpartitioned(t, store), nil), newProbe(t, unpartitioned(t, another()), nil)
		fA, fB := newFirings(t), newFirings(t)
		swA := relay.NewSweeper(pA, fA.handle, leaseOptions(leasesA))
		stopA := run(t, swA)
		rA := relay.New(pA, func(context.Context, execstore.OutboxEntry) error { return nil }, leaseOptions(leasesA))
		stopRelayA := run(t, rA)
		settleUntil(t, func() bool { return swA.Stats().Holding && rA.Stats().Holding }, "A's sweeper and relay both hold a lease")
		swB := relay.NewSweeper(pB, fB.handle, leaseOptions(leasesB))
		stopB := run(t, swB)

		em := newEmitter(t, store)
		now := nowFireTime()
		for i := range 5 {
			em.schedule(fmt.Sprintf("a%d", i), "T", now.Add(-time.Second))
		}
		settleUntil(t, func() bool { return swA.Stats().Acked == 5 }, "A fired the first timers")
		assert.Zero(t, swB.Stats().Delivered, "B stands by")

		// The lease store dies first: a session that sees its store fail gives its
		// lease up, and a release sent before the death would land.
		dieA()
		pA.kill()
		_ = stopA()
		_ = stopRelayA()
		for i := range 5 {
			em.schedule(fmt.Sprintf("b%d", i), "T", nowFireTime().Add(-time.Second))
		}
		settleUntil(t, func() bool { return swB.Stats().Acked == 5 }, "B fired what was armed after A died")
		require.NoError(t, stopB())
		assert.EqualValues(t, 1, swB.Stats().TakeOvers)
		fA.check()
		fB.check()
		assert.Empty(t, timers(t, store))
	})
}
