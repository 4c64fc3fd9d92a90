package batch_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/batch"
)

// flushRecorder records batches and can hold flushes until released.
type flushRecorder struct {
	mu       sync.Mutex
	batches  [][]int
	hold     chan struct{} // flushes block on it while non-nil
	started  chan int      // receives each batch's size as its flush starts
	inFlight int
	maxIn    int
}

func newRecorder(hold bool) *flushRecorder {
	r := &flushRecorder{started: make(chan int, 1000)}
	if hold {
		r.hold = make(chan struct{})
	}
	return r
}

func (r *flushRecorder) flush(b []int) {
	r.mu.Lock()
	r.batches = append(r.batches, append([]int(nil), b...))
	r.inFlight++
	r.maxIn = max(r.maxIn, r.inFlight)
	r.mu.Unlock()
	r.started <- len(b)
	if r.hold != nil {
		<-r.hold
	}
	r.mu.Lock()
	r.inFlight--
	r.mu.Unlock()
}

func (r *flushRecorder) all() [][]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]int(nil), r.batches...)
}

func one(int) int { return 1 }

// A lone item is flushed at once, alone: no linger.
func TestCoalescerNoLinger(t *testing.T) {
	r := newRecorder(false)
	c := batch.NewCoalescer(batch.CoalescerConfig{}, one, r.flush)
	defer c.Close()
	for i := range 3 {
		require.NoError(t, c.Submit(context.Background(), i))
		assert.Equal(t, 1, <-r.started, "item %d waited for company", i)
	}
}

// While every slot is busy the next batch accumulates, and goes out when a slot frees.
func TestCoalescerAccumulatesWhileBusy(t *testing.T) {
	r := newRecorder(true)
	c := batch.NewCoalescer(batch.CoalescerConfig{MaxInFlight: 1, MaxItems: 100}, one, r.flush)
	require.NoError(t, c.Submit(context.Background(), 0))
	assert.Equal(t, 1, <-r.started)
	for i := 1; i <= 10; i++ {
		require.NoError(t, c.Submit(context.Background(), i))
	}
	r.hold <- struct{}{} // the first flush returns; the ten waiting go out together
	assert.Equal(t, 10, <-r.started)
	close(r.hold)
	c.Close()
	assert.Equal(t, [][]int{{0}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}}, r.all())
}

// Past EagerInFlight, a slot flushes only a backlog: items that do not make one wait for an
// eager slot, and a backlog goes out at once on a free slot. Busy tells whether anything
// waits or is being flushed.
func TestCoalescerBacklogSlots(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRecorder(true)
		c := batch.NewCoalescer(batch.CoalescerConfig{MaxInFlight: 3, EagerInFlight: 1, BacklogItems: 3, MaxItems: 100}, one, r.flush)
		defer c.Close()
		ctx := context.Background()
		assert.False(t, c.Busy())
		submit := func(ids ...int) {
			for _, id := range ids {
				require.NoError(t, c.Submit(ctx, id))
			}
			synctest.Wait()
		}
		submit(0)
		assert.Equal(t, 1, <-r.started, "the eager slot takes a lone item")
		submit(1, 2)
		assert.Empty(t, r.started, "two items are no backlog: they wait for the eager slot")
		assert.True(t, c.Busy())
		submit(3)
		assert.Equal(t, 3, <-r.started, "a backlog of three goes out on a second slot")
		submit(4)
		r.hold <- struct{}{} // one flush returns; the other holds the eager count
		synctest.Wait()
		assert.Empty(t, r.started, "one item waits while EagerInFlight batches are flushed")
		r.hold <- struct{}{}
		assert.Equal(t, 1, <-r.started, "the eager slot is free: the item goes out")
		assert.True(t, c.Busy())
		r.hold <- struct{}{}
		synctest.Wait()
		assert.False(t, c.Busy())
		assert.ElementsMatch(t, [][]int{{0}, {1, 2, 3}, {4}}, r.all())
	})
}

// Batches respect MaxItems and MaxBytes, each batch is a run of consecutive submissions, and
// MaxInFlight bounds the flushes running at once.
func TestCoalescerCaps(t *testing.T) {
	r := newRecorder(true)
	weights := []int{1, 1, 1, 1, 1, 1, 1, 9, 2, 2, 2, 2, 2, 6, 6, 1}
	size := func(id int) int { return weights[id] }
	c := batch.NewCoalescer(batch.CoalescerConfig{MaxInFlight: 2, MaxItems: 4, MaxBytes: 10}, size, r.flush)
	require.NoError(t, c.Submit(context.Background(), 0))
	<-r.started
	require.NoError(t, c.Submit(context.Background(), 1))
	<-r.started // both slots busy
	done := make(chan struct{})
	go func() {
		defer close(done)
		for id := 2; id < len(weights); id++ {
			assert.NoError(t, c.Submit(context.Background(), id))
		}
	}()
	close(r.hold)
	<-done
	c.Close()
	seen := make([]bool, len(weights))
	for _, b := range r.all() {
		assert.LessOrEqual(t, len(b), 4)
		sum := 0
		for k, id := range b {
			if k > 0 {
				assert.Equal(t, b[k-1]+1, id, "batch %v is not a run of consecutive submissions", b)
				assert.Less(t, sum, 10, "batch %v grew past MaxBytes", b)
			}
			sum += weights[id]
			assert.False(t, seen[id])
			seen[id] = true
		}
	}
	for id, ok := range seen {
		assert.True(t, ok, "item %d never flushed", id)
	}
	assert.LessOrEqual(t, r.maxIn, 2)
}

// Close flushes everything submitted before it; Submit after Close is refused.
func TestCoalescerClose(t *testing.T) {
	r := newRecorder(false)
	c := batch.NewCoalescer(batch.CoalescerConfig{MaxInFlight: 1}, one, r.flush)
	for i := range 200 {
		require.NoError(t, c.Submit(context.Background(), i))
	}
	c.Close()
	n := 0
	for _, b := range r.all() {
		n += len(b)
	}
	assert.Equal(t, 200, n)
	assert.ErrorIs(t, c.Submit(context.Background(), 1), execstore.ErrClosed)
	c.Close()
}

// Submit blocked on a full intake honours its context.
func TestCoalescerSubmitContext(t *testing.T) {
	r := newRecorder(true)
	c := batch.NewCoalescer(batch.CoalescerConfig{MaxInFlight: 1, MaxItems: 2}, one, r.flush)
	require.NoError(t, c.Submit(context.Background(), 0))
	<-r.started
	// The loop holds up to MaxItems in its batch and the intake holds MaxItems more.
	for i := range 4 {
		require.NoError(t, c.Submit(context.Background(), i))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, c.Submit(ctx, 9), context.Canceled)
	close(r.hold)
	c.Close()
}

// TrySubmit refuses, without blocking, once the batch and the intake are full, and after
// Close; every item it took is flushed.
func TestCoalescerTrySubmit(t *testing.T) {
	r := newRecorder(true)
	c := batch.NewCoalescer(batch.CoalescerConfig{MaxInFlight: 1, MaxItems: 2}, one, r.flush)
	require.True(t, c.TrySubmit(0))
	<-r.started
	took := 1
	for i := 1; i < 100 && c.TrySubmit(i); i++ {
		took++
	}
	// The loop holds up to MaxItems in its batch and the intake MaxItems more.
	assert.LessOrEqual(t, took, 1+2+2, "TrySubmit took more than the batch and the intake hold")
	close(r.hold)
	c.Close()
	assert.False(t, c.TrySubmit(7), "TrySubmit after Close")
	n := 0
	for _, b := range r.all() {
		n += len(b)
	}
	assert.Equal(t, took, n, "every item taken is flushed")
}

func BenchmarkCoalescer(b *testing.B) {
	b.ReportAllocs()
	var wg sync.WaitGroup
	c := batch.NewCoalescer(batch.CoalescerConfig{}, func(*sync.WaitGroup) int { return 1 }, func(items []*sync.WaitGroup) {
		for _, w := range items {
			w.Done()
		}
	})
	defer c.Close()
	b.ResetTimer()
	for range b.N {
		wg.Add(1)
		_ = c.Submit(context.Background(), &wg)
	}
	wg.Wait()
}
