package aio_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/server"
)

// longRuns reports whether EXECSTORE_LONG=1 asks for the long overload run.
func longRuns() bool { return os.Getenv("EXECSTORE_LONG") == "1" }

// Producers outrunning the server many times over: non-blocking submits are shed with
// ErrOverloaded at once, the queue never holds more than its depth, memory stays bounded,
// and the store serves normally once the load drops.
func TestOverloadSheds(t *testing.T) {
	const depth = 32
	h := newHarness(t, aio.Options{Connection: server.Connection{Workers: 2, QueueDepth: depth, ShedLoad: true}})
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)

	var accepted, shed atomic.Int64
	var maxQueued atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for p := range 32 {
		wg.Go(func() {
			var futures []*aio.Future[[]int64]
			for i := 0; ; i++ {
				select {
				case <-stop:
					for _, f := range futures {
						_, err := f.Result()
						assert.NoError(t, err)
					}
					return
				default:
				}
				f := h.store.CommitAsync(bg, newExe(fmt.Sprintf("p%d-%d", p, i)), execstore.Commit{
					Emits: []execstore.Emit{{Event: make([]byte, 1024)}}})
				select {
				case <-f.Done():
					if _, err := f.Result(); errors.Is(err, execstore.ErrOverloaded) {
						shed.Add(1)
						continue
					}
				default:
				}
				accepted.Add(1)
				futures = append(futures, f)
				if q := int64(h.store.Stats().Queued); q > maxQueued.Load() {
					maxQueued.Store(q)
				}
			}
		})
	}
	overload := 1500 * time.Millisecond
	if longRuns() {
		overload = 30 * time.Second
	}
	time.Sleep(overload)
	close(stop)
	wg.Wait()

	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("accepted %d, shed %d, queue high-water %d of %d, heap in use %d KiB -> %d KiB",
		accepted.Load(), shed.Load(), maxQueued.Load(), depth, before.HeapInuse>>10, after.HeapInuse>>10)
	assert.Positive(t, shed.Load(), "the producers never outran the server")
	assert.LessOrEqual(t, maxQueued.Load(), int64(depth))
	assert.Less(t, growth, int64(64<<20), "memory grew with the offered load")
	assert.EqualValues(t, accepted.Load(), h.count(t), "every accepted commit landed, no shed one did")

	// Load dropped: a plain call goes through.
	e := newExe("after")
	require.NoError(t, h.store.Save(bg, e))
	assert.EqualValues(t, 1, e.Version)
}

// Close under full load: blocked producers are refused with ErrClosed, everything accepted
// is settled, Close returns within its context, and (TestMain) no goroutine is left.
func TestCloseUnderLoad(t *testing.T) {
	h := newHarness(t, aio.Options{})
	s := h.reopen(t, aio.Options{Connection: server.Connection{Workers: 2, QueueDepth: 8}})
	var wg sync.WaitGroup
	var ok, closed atomic.Int64
	for p := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := s.Commit(bg, newExe(fmt.Sprintf("c%d-%d", p, i)), execstore.Commit{})
				switch {
				case err == nil:
					ok.Add(1)
				case errors.Is(err, execstore.ErrClosed):
					closed.Add(1)
					return
				default:
					t.Errorf("unexpected: %v", err)
					return
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	ctx, cancel := context.WithTimeout(bg, 10*time.Second)
	defer cancel()
	require.NoError(t, s.Close(ctx))
	wg.Wait()
	assert.EqualValues(t, 16, closed.Load())
	assert.EqualValues(t, ok.Load(), h.count(t), "an acknowledged commit is missing, or a refused one landed")
}
