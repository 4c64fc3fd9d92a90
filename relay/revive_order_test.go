package relay_test

import (
	"context"
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

// gatedStore is a dead-letters store whose outbox reads (scans and targeted reads) can be
// held back: while a test holds gate, no read of the outbox runs, and taking it waits for
// the reads in progress. It carries the wrapped store's wake-up signal, so its commits are
// still handed over.
type gatedStore struct {
	execstore.DeadCounting
	gate sync.RWMutex
}

func newGatedStore(t *testing.T, store execstore.Store) *gatedStore {
	g := &gatedStore{DeadCounting: store.(execstore.DeadCounting)}
	require.Implements(t, (*execstore.Targeted)(nil), store)
	if sig := wake.Of(store); sig != nil {
		wake.Register(g, sig)
		t.Cleanup(func() { wake.Unregister(g) })
	}
	return g
}

func (g *gatedStore) PendingOutbox(ctx context.Context, limit int) ([]execstore.OutboxEntry, error) {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.DeadCounting.PendingOutbox(ctx, limit)
}

func (g *gatedStore) PendingOutboxIn(ctx context.Context, parts []int, limit int) ([]execstore.OutboxEntry, error) {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.DeadCounting.PendingOutboxIn(ctx, parts, limit)
}

func (g *gatedStore) PendingOutboxOf(ctx context.Context, ids []string, limit int) ([]execstore.OutboxEntry, error) {
	g.gate.RLock()
	defer g.gate.RUnlock()
	return g.DeadCounting.(execstore.Targeted).PendingOutboxOf(ctx, ids, limit)
}

func (g *gatedStore) DueTimersOf(ctx context.Context, ids []string, now time.Time, limit int) ([]execstore.DueTimer, error) {
	return g.DeadCounting.(execstore.Targeted).DueTimersOf(ctx, ids, now, limit)
}

// An entry revived after it went dead keeps its place before the entries its source commits
// after the revival: the revival moves the source's version on, so the relay, which knew
// every version before it, does not hand the next commit's entry over without a scan, and
// the scan reads both in order. No scan may run between the revival and the next commit
// (the outbox reads are held back meanwhile): only the version tells the relay.
func TestRevivedEntryIsNotOvertaken(t *testing.T) {
	eachDeadLetters(t, func(t *testing.T, store execstore.Store) {
		dl := store.(execstore.DeadLetters)
		g := newGatedStore(t, store)
		var mu sync.Mutex
		var order []string
		failed := false
		handler := func(_ context.Context, e execstore.OutboxEntry) error {
			mu.Lock()
			defer mu.Unlock()
			order = append(order, string(e.Event))
			if string(e.Event) == "e1" && !failed {
				failed = true
				return fmt.Errorf("%w: cannot handle e1 yet", relay.ErrPermanent)
			}
			return nil
		}
		seen := func(event string) bool {
			mu.Lock()
			defer mu.Unlock()
			for _, e := range order {
				if e == event {
					return true
				}
			}
			return false
		}
		r := relay.New(g, handler, relay.Options{PollInterval: time.Hour})
		stop := run(t, r)
		eventually(t, func() bool { st := r.Stats(); return st.Holding && st.Scans >= 1 }, "the relay holds its partitions")

		exe := &execstore.Execution{ID: "s", DefinitionID: "relay-test", Status: execstore.Running}
		seqs, err := store.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("e1")}}})
		require.NoError(t, err)
		eventually(t, func() bool { return r.Stats().Dead == 1 }, "e1 moved to dead")

		g.gate.Lock() // no outbox read until e2 is committed
		revived, err := dl.Revive(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: "s", Seq: seqs[0]})
		require.NoError(t, err)
		require.True(t, revived)
		exe, err = store.Load(bg, "s")
		require.NoError(t, err)
		_, err = store.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("e2")}}})
		require.NoError(t, err)
		g.gate.Unlock()

		eventually(t, func() bool { return seen("e2") }, "e2 delivered")
		mu.Lock()
		got := append([]string(nil), order...)
		mu.Unlock()
		require.Equal(t, []string{"e1", "e1", "e2"}, got, "the revived entry is delivered before the entry committed after it")
		eventually(t, func() bool { return r.Stats().Acked == 2 }, "both acked")
		require.NoError(t, stop())
		assert.Zero(t, pending(t, store))
	})
}
