package batch

import (
	"context"
	"sync"

	"github.com/execstore/execstore"
)

// The defaults of CoalescerConfig.
const (
	defaultMaxItems    = 64
	defaultMaxBytes    = 4 << 20
	defaultMaxInFlight = 4
)

// CoalescerConfig bounds a Coalescer's batches.
type CoalescerConfig struct {
	MaxItems    int // items per batch; default 64
	MaxBytes    int // a batch closes once its summed item sizes reach it; default 4 MiB
	MaxInFlight int // batches being flushed at once; default 4
}

// Coalescer groups items submitted concurrently into batches and hands each batch to a flush
// function. Its policy, after badger's write loop:
//
//   - No linger: an item that arrives while a flush slot is free goes out at once, with
//     whatever else is already waiting. No timer ever delays an item.
//   - Under load, while every slot is busy, the next batch accumulates. It goes out as soon as
//     a slot frees. Once it reaches MaxItems or MaxBytes it waits for a slot. The item that
//     reaches MaxBytes is the batch's last, so a batch exceeds it by at most one item.
//   - At most MaxInFlight batches are being flushed at any time. Flush runs in one of
//     MaxInFlight goroutines the Coalescer keeps until Close (so a flush that calls deep
//     into a driver does not grow a new goroutine's stack for every batch), never in
//     Submit's caller, and must settle every item of its batch.
//   - Items are flushed in the order they were submitted, within and across batches that start
//     in order (batches in flight at once may finish in any order).
//   - Close flushes everything submitted before it and waits for every flush to return.
type Coalescer[T any] struct {
	in    chan T
	work  chan []T // a batch, to a flusher; the loop took its slot
	size  func(T) int
	flush func([]T)
	cfg   CoalescerConfig
	slots chan struct{}
	wg    sync.WaitGroup
	done  chan struct{}

	mu     sync.RWMutex
	closed bool
}

// NewCoalescer starts a Coalescer. size returns an item's weight against MaxBytes.
func NewCoalescer[T any](cfg CoalescerConfig, size func(T) int, flush func([]T)) *Coalescer[T] {
	if cfg.MaxItems <= 0 {
		cfg.MaxItems = defaultMaxItems
	}
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = defaultMaxBytes
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = defaultMaxInFlight
	}
	c := &Coalescer[T]{
		in:    make(chan T, cfg.MaxItems),
		size:  size,
		flush: flush,
		cfg:   cfg,
		work:  make(chan []T),
		slots: make(chan struct{}, cfg.MaxInFlight),
		done:  make(chan struct{}),
	}
	c.wg.Add(cfg.MaxInFlight)
	for range cfg.MaxInFlight {
		go c.flusher()
	}
	go c.loop()
	return c
}

// Submit hands item to the next batch. It blocks while the intake is full, until ctx ends.
// After Close it returns execstore.ErrClosed.
func (c *Coalescer[T]) Submit(ctx context.Context, item T) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return execstore.ErrClosed
	}
	select {
	case c.in <- item:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// TrySubmit hands item to the next batch unless the intake is full or the Coalescer is
// closed, and reports whether it did. It never blocks.
func (c *Coalescer[T]) TrySubmit(item T) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return false
	}
	select {
	case c.in <- item:
		return true
	default:
		return false
	}
}

// Close flushes every submitted item and waits for all flushes to return.
func (c *Coalescer[T]) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		close(c.in)
	}
	c.mu.Unlock()
	<-c.done
}

func (c *Coalescer[T]) loop() {
	defer close(c.done)
	var batch []T
	bytes := 0
	add := func(item T) {
		batch = append(batch, item)
		bytes += c.size(item)
	}
	full := func() bool { return len(batch) >= c.cfg.MaxItems || bytes >= c.cfg.MaxBytes }
	open := true
	for open || len(batch) > 0 {
		if len(batch) == 0 {
			item, ok := <-c.in
			if !ok {
				break
			}
			add(item)
		}
		if !full() && open {
			select {
			case c.slots <- struct{}{}:
			case item, ok := <-c.in:
				if ok {
					add(item)
				} else {
					open = false
				}
				continue
			}
		} else {
			c.slots <- struct{}{}
		}
		// A slot is ours: take what is already waiting, up to the caps, and go.
		for open && !full() {
			select {
			case item, ok := <-c.in:
				if !ok {
					open = false
					continue
				}
				add(item)
				continue
			default:
			}
			break
		}
		c.work <- batch
		batch, bytes = nil, 0
	}
	close(c.work)
	c.wg.Wait()
}

// flusher flushes the batches the loop hands it, one at a time, and frees each one's slot
// once its flush returned. There are MaxInFlight of them and a batch is handed over only with
// a slot taken, so one is free, or freeing its slot, whenever a batch is handed over.
func (c *Coalescer[T]) flusher() {
	defer c.wg.Done()
	for batch := range c.work {
		c.flush(batch)
		<-c.slots
	}
}
