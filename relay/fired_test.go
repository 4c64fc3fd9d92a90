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
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/relay"
)

// handlerCommits is a timer handler that commits on the timer's execution with the context
// it was given, as an engine's does, and then returns what fail says for the attempt.
type handlerCommits struct {
	t     *testing.T
	store execstore.Store
	fail  func(attempt int) error

	mu       sync.Mutex
	attempts map[string]int
}

func (h *handlerCommits) handle(ctx context.Context, tm execstore.DueTimer) error {
	key := tm.ExecutionID + "/" + tm.Path
	h.mu.Lock()
	attempt := h.attempts[key]
	h.attempts[key]++
	h.mu.Unlock()
	exe, err := h.store.Load(ctx, tm.ExecutionID)
	if err != nil {
		return err
	}
	if _, err := h.store.Commit(ctx, exe, execstore.Commit{}); err != nil {
		return err
	}
	if h.fail != nil {
		return h.fail(attempt)
	}
	return nil
}

// With CommitRemovesTimer, a handler that commits on its timer's execution through the aio
// store removes the timer with that commit: the sweeper sends no delete, and counts the ack
// as carried.
func TestSweeperTimersRideInTheirHandlersCommits(t *testing.T) {
	store, _ := backends[1].open(t)
	em := newEmitter(t, store)
	now := nowFireTime()
	for i := range 5 {
		em.schedule(fmt.Sprintf("x%d", i), "T", now.Add(-time.Second))
	}
	h := &handlerCommits{t: t, store: store, attempts: map[string]int{}}
	sw := relay.NewSweeper(store, h.handle, relay.Options{CommitRemovesTimer: true})
	stop := run(t, sw)
	eventually(t, func() bool { return sw.Stats().Acked == 5 }, "every timer fired and acked")
	require.NoError(t, stop())
	assert.EqualValues(t, 5, sw.Stats().Carried)
	assert.EqualValues(t, 5, store.(*aio.Store).Stats().TimersCarried)
	assert.Zero(t, store.(*aio.Store).Stats().Ops["delete_timer"].Calls, "no delete was sent")
	assert.Empty(t, timers(t, store))
}

// A handler that fails after its commit removed the timer gets the timer again: the sweeper
// put it back before handling the failure. At least once: a timer is acked only by a
// handler that returned nil.
func TestSweeperRestoresATimerWhoseHandlerFailedAfterItsCommit(t *testing.T) {
	for _, failure := range []error{errors.New("after the commit"), relay.ErrLeavePending} {
		t.Run(failure.Error(), func(t *testing.T) {
			store, _ := backends[1].open(t)
			em := newEmitter(t, store)
			em.schedule("x", "T", nowFireTime().Add(-time.Second))
			h := &handlerCommits{t: t, store: store, attempts: map[string]int{}, fail: func(attempt int) error {
				if attempt == 0 {
					return failure
				}
				return nil
			}}
			sw := relay.NewSweeper(store, h.handle, relay.Options{CommitRemovesTimer: true, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
			stop := run(t, sw)
			eventually(t, func() bool { return sw.Stats().Acked == 1 }, "the timer fired again and was acked")
			require.NoError(t, stop())
			st := sw.Stats()
			assert.EqualValues(t, 2, st.Delivered)
			assert.EqualValues(t, 1, st.Restored)
			assert.EqualValues(t, 1, st.Carried)
			assert.Equal(t, 2, h.attempts["x/T"])
			assert.Empty(t, timers(t, store))
		})
	}
}

// A handler whose execution committed again after its commit removed the timer, and that
// then fails, does not get the timer back (that later commit may have cancelled it): the
// sweeper reports ErrNotRestored.
func TestSweeperReportsATimerItCannotRestore(t *testing.T) {
	store, _ := backends[1].open(t)
	em := newEmitter(t, store)
	em.schedule("x", "T", nowFireTime().Add(-time.Second))
	handler := func(ctx context.Context, tm execstore.DueTimer) error {
		for range 2 { // the second commit stands for another event's, in between
			exe, err := store.Load(ctx, tm.ExecutionID)
			if err != nil {
				return err
			}
			if _, err := store.Commit(ctx, exe, execstore.Commit{}); err != nil {
				return err
			}
		}
		return errors.New("after the commits")
	}
	reported := make(chan error, 10)
	sw := relay.NewSweeper(store, handler, relay.Options{CommitRemovesTimer: true, RetryMin: time.Millisecond, OnError: func(err error) {
		var re *relay.Error
		if errors.As(err, &re) && re.Op == relay.OpRestore {
			reported <- err
		}
	}})
	stop := run(t, sw)
	select {
	case err := <-reported:
		assert.ErrorIs(t, err, relay.ErrNotRestored)
	case <-time.After(waitLong):
		t.Fatal("nothing reported")
	}
	require.NoError(t, stop())
	st := sw.Stats()
	assert.EqualValues(t, 1, st.Delivered)
	assert.Zero(t, st.Restored)
	assert.Zero(t, st.Acked)
	assert.Empty(t, timers(t, store))
}

// By default the handler's commit leaves the timer alone: it is deleted only once the
// handler returned nil.
func TestSweeperDeletesTimersAfterTheirHandlersByDefault(t *testing.T) {
	store, _ := backends[1].open(t)
	em := newEmitter(t, store)
	em.schedule("x", "T", nowFireTime().Add(-time.Second))
	var during []execstore.DueTimer
	handler := func(ctx context.Context, tm execstore.DueTimer) error {
		exe, err := store.Load(ctx, tm.ExecutionID)
		if err != nil {
			return err
		}
		if _, err := store.Commit(ctx, exe, execstore.Commit{}); err != nil {
			return err
		}
		during, err = store.DueTimers(ctx, time.Now(), 0)
		return err
	}
	sw := relay.NewSweeper(store, handler, relay.Options{})
	stop := run(t, sw)
	eventually(t, func() bool { return sw.Stats().Acked == 1 }, "the timer fired and was deleted")
	require.NoError(t, stop())
	assert.Len(t, during, 1, "the timer was still stored after the handler's commit")
	assert.Zero(t, sw.Stats().Carried)
	assert.Empty(t, timers(t, store))
}
