package aio_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/wake"
)

// cacheAtEnd is a wake.Sink that records, at each End of a won commit, the version the
// store's snapshot cache held of its execution then.
type cacheAtEnd struct {
	store *aio.Store
	mu    sync.Mutex
	seen  []string // "id: committed vN, cached vM" where they differ
	ends  int
}

func (c *cacheAtEnd) Begin(string) any { return nil }

func (c *cacheAtEnd) End(id string, _ any, won *wake.Committed) {
	if won == nil {
		return
	}
	cached, ok := c.store.CachedVersion(id)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ends++
	if !ok || cached != won.Version {
		c.seen = append(c.seen, fmt.Sprintf("%s: committed v%d, cached v%d (held: %v)", id, won.Version, cached, ok))
	}
}

// A commit is handed over to the relays (End) only once the snapshot cache holds what it
// wrote, alone and grouped: a handler started by the hand-over loads the new version from
// memory. It fails if the hand-over runs ahead of the cache.
func TestHandOverComesAfterTheCache(t *testing.T) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		opts.CacheSize = testCacheSize
		h := newHarness(t, opts)
		sink := &cacheAtEnd{store: h.store}
		defer wake.Of(h.store).Subscribe(sink)()
		var wg sync.WaitGroup
		for i := range 8 { // concurrent commits, so that group commit batches them
			wg.Go(func() {
				exe := newExe(fmt.Sprintf("e%d", i))
				for j := range 5 {
					_, err := h.store.Commit(bg, exe, execstore.Commit{ProcessedEventID: fmt.Sprintf("ev%d", j),
						Emits: []execstore.Emit{{TargetID: "t", Event: []byte("x")}}})
					assert.NoError(t, err)
				}
			})
		}
		wg.Wait()
		require.Equal(t, 40, sink.ends, "every won commit ended on the sink")
		assert.Empty(t, sink.seen, "hand-overs that ran ahead of the cache")
	})
}
