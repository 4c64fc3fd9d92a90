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
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// eachDeadLetters runs f as a subtest on every backend whose store is an
// execstore.DeadLetters.
func eachDeadLetters(t *testing.T, f func(t *testing.T, store execstore.Store)) {
	keeps := map[string]bool{}
	_, keeps["memstore"] = any((*memstore.Store)(nil)).(execstore.DeadLetters)
	_, keeps["aio"] = any((*aio.Store)(nil)).(execstore.DeadLetters)
	require.True(t, keeps["memstore"])
	for _, b := range backends {
		if keeps[b.name] {
			t.Run(b.name, func(t *testing.T) {
				store, _ := b.open(t)
				f(t, store)
			})
		}
	}
}

// eachDeadLettersSettled is eachDeadLetters with the memstore run in a testing/synctest
// bubble (virtual time), as eachBackendSettled runs it. f waits with settleUntil.
func eachDeadLettersSettled(t *testing.T, f func(t *testing.T, store execstore.Store)) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		require.Implements(t, (*execstore.DeadLetters)(nil), store)
		f(t, store)
	})
}

// deadLog records the OnDead events.
type deadLog struct {
	mu     sync.Mutex
	events []relay.DeadEvent
}

func (l *deadLog) add(e relay.DeadEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *deadLog) all() []relay.DeadEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]relay.DeadEvent(nil), l.events...)
}

// An entry whose handler always fails is delivered MaxAttempts times, each failure recorded
// with it, and then moved to dead with its attempts and last error: the execution's later
// entries, held back behind it until then, are delivered after it. Revived, it is delivered
// again and acked.
func TestPoisonEntryIsDeadLettered(t *testing.T) {
	eachDeadLettersSettled(t, func(t *testing.T, store execstore.Store) {
		dl, ok := store.(execstore.DeadLetters)
		require.True(t, ok, "%T keeps dead letters", store)
		var mu sync.Mutex
		var order []string
		poisoned := true
		handler := func(_ context.Context, e execstore.OutboxEntry) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, fmt.Sprintf("%s@%d", e.Event, e.Attempts.Count))
			if string(e.Event) == "e1" && poisoned {
				return fmt.Errorf("cannot handle %s", e.Event)
			}
			return nil
		}
		var dead deadLog
		r := relay.New(store, handler, relay.Options{MaxAttempts: 3, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
			PollInterval: 20 * time.Millisecond, OnDead: dead.add})
		stop := run(t, r)
		em := newEmitter(t, store)
		s1 := em.emit("s", "t", "e1")
		em.emit("s", "t", "e2")
		em.emit("s", "t", "e3")
		// OnDead runs after the burial lets the later entries go on: it may come after them.
		settleUntil(t, func() bool { return r.Stats().Acked == 2 && len(dead.all()) == 1 }, "the later entries delivered, the dead one reported")
		mu.Lock()
		assert.Equal(t, []string{"e1@0", "e1@1", "e1@2", "e2@0", "e3@0"}, order,
			"each attempt sees the ones recorded before it; the later entries come after the dead one")
		mu.Unlock()
		assert.EqualValues(t, 1, r.Stats().Dead)
		evs := dead.all()
		require.Len(t, evs, 1)
		ref := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: "s", Seq: s1}
		assert.Equal(t, ref, evs[0].Item)
		assert.Equal(t, 3, evs[0].Attempts.Count)
		assert.Equal(t, "cannot handle e1", evs[0].Attempts.LastError)
		assert.ErrorContains(t, evs[0].Err, "cannot handle e1")
		assert.Zero(t, pending(t, store))
		page, err := dl.ListDead(bg, execstore.DeadQuery{})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		assert.Equal(t, ref, page.Items[0].ItemRef)
		assert.Equal(t, []byte("e1"), page.Items[0].Event)
		assert.Equal(t, 3, page.Items[0].Count)

		mu.Lock()
		poisoned = false
		mu.Unlock()
		revived, err := dl.Revive(bg, ref)
		require.NoError(t, err)
		require.True(t, revived)
		settleUntil(t, func() bool { return r.Stats().Acked == 3 }, "the revived entry delivered")
		require.NoError(t, stop())
		page, err = dl.ListDead(bg, execstore.DeadQuery{})
		require.NoError(t, err)
		assert.Empty(t, page.Items)
		assert.Zero(t, pending(t, store))
	})
}

// A handler that says its failure is permanent has the entry moved to dead at once.
func TestPermanentFailureIsDeadAtOnce(t *testing.T) {
	eachDeadLettersSettled(t, func(t *testing.T, store execstore.Store) {
		calls := 0
		var mu sync.Mutex
		r := relay.New(store, func(_ context.Context, e execstore.OutboxEntry) error {
			mu.Lock()
			defer mu.Unlock()
			calls++
			return fmt.Errorf("malformed event: %w", relay.ErrPermanent)
		}, relay.Options{RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond})
		stop := run(t, r)
		newEmitter(t, store).emit("s", "t", "x")
		settleUntil(t, func() bool { return r.Stats().Dead == 1 }, "dead")
		require.NoError(t, stop())
		assert.Equal(t, 1, calls)
		assert.Zero(t, pending(t, store))
	})
}

// A failure below MaxAttempts is recorded with the entry, which stays pending: its attempts
// and last error are there for anyone to read.
func TestFailuresAreRecordedWithTheEntry(t *testing.T) {
	eachDeadLettersSettled(t, func(t *testing.T, store execstore.Store) {
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error {
			return errors.New("downstream is down")
		}, relay.Options{RetryMin: time.Hour, RetryMax: time.Hour})
		stop := run(t, r)
		newEmitter(t, store).emit("s", "t", "x")
		settleUntil(t, func() bool {
			p, err := store.PendingOutbox(bg, 0)
			require.NoError(t, err)
			return len(p) == 1 && p[0].Attempts.Count == 1
		}, "the failure recorded")
		require.NoError(t, stop())
		p, err := store.PendingOutbox(bg, 0)
		require.NoError(t, err)
		assert.Equal(t, "downstream is down", p[0].Attempts.LastError)
		assert.False(t, p[0].Attempts.LastAt.IsZero())
		assert.Zero(t, r.Stats().Dead)
	})
}

// A due timer whose handler always fails is moved to dead after MaxAttempts: it is no
// longer due, and the execution's other timers fire.
func TestPoisonTimerIsDeadLettered(t *testing.T) {
	eachDeadLettersSettled(t, func(t *testing.T, store execstore.Store) {
		dl := store.(execstore.DeadLetters)
		f := newFirings(t)
		f.fail = func(tm execstore.DueTimer, _ int) error {
			if tm.Path == "bad" {
				return errors.New("bad timer")
			}
			return nil
		}
		sw := relay.NewSweeper(store, f.handle, relay.Options{MaxAttempts: 2, RetryMin: time.Millisecond,
			RetryMax: 5 * time.Millisecond, PollInterval: 20 * time.Millisecond})
		stop := run(t, sw)
		em := newEmitter(t, store)
		now := nowFireTime().Add(-time.Second)
		em.commit("x", execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("bad", now),
			execstore.ScheduleTimer("good", now.Add(time.Millisecond))}})
		settleUntil(t, func() bool { return sw.Stats().Dead == 1 && sw.Stats().Acked == 1 }, "the bad one dead, the good one fired")
		require.NoError(t, stop())
		assert.Empty(t, timers(t, store))
		page, err := dl.ListDead(bg, execstore.DeadQuery{Kinds: []execstore.ItemKind{execstore.TimerItem}})
		require.NoError(t, err)
		require.Len(t, page.Items, 1)
		assert.Equal(t, "bad", page.Items[0].Path)
		assert.Equal(t, 2, page.Items[0].Count)
		assert.Equal(t, "bad timer", page.Items[0].LastError)
	})
}
