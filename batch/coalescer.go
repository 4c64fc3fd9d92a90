package batch

import (
	"context"
	"slices"
	"sync"

	"github.com/execstore/execstore"
)

// The defaults of CoalescerConfig.
const (
	defaultMaxItems     = 64
	defaultMaxBytes     = 4 << 20
	defaultMaxInFlight  = 4
	defaultBacklogItems = 8
)

// CoalescerConfig bounds a Coalescer's batches.
type CoalescerConfig struct {
	MaxItems    int // items per batch; default 64
	MaxBytes    int // a batch closes once its summed item sizes reach it; default 4 MiB
	MaxInFlight int // batches being flushed at once; default 4
	// EagerInFlight is how many of the MaxInFlight batches go out with whatever waits, down
	// to one item. Past it, a batch goes out only while BacklogItems items or more wait.
	// Default (0, or more than MaxInFlight): MaxInFlight, every slot eager.
	EagerInFlight int
	// BacklogItems is how many waiting items make a backlog, which the slots past
	// EagerInFlight flush at once; default 8.
	BacklogItems int
}

// Coalescer groups items submitted concurrently into batches and hands each batch to a flush
// function. Its policy, after badger's write loop:
//
//   - No linger: an item that arrives while a flush slot is free goes out at once, with
//     whatever else is already waiting. No timer ever delays an item.
//   - Under load, while every slot is busy, the next batch accumulates. It goes out as soon as
//     a slot frees. Once it reaches MaxItems or MaxBytes it waits for a slot. The item that
//     reaches MaxBytes is the batch's last, so a batch exceeds it by at most one item.
//   - At most MaxInFlight batches are being flushed at any time, and an item goes out at
//     once only while fewer than EagerInFlight are. Past EagerInFlight, the slots flush a
//     backlog only: a batch goes out while BacklogItems items or more wait, so that a burst
//     does not wait a whole flush, and a steady trickle still gathers into few batches.
//     Each such batch costs one command for at least BacklogItems items (fewer only when
//     MaxItems or MaxBytes close it sooner). Flush runs in one of
//     MaxInFlight goroutines the Coalescer keeps until Close (so a flush that calls deep
//     into a driver does not grow a new goroutine's stack for every batch), never in
//     Submit's caller, and must settle every item of its batch.
//   - Items are flushed in the order they were submitted, within and across batches that start
//     in order (batches in flight at once may finish in any order).
//   - At most 2×MaxItems items wait for a slot: Submit blocks while that many do.
//   - Close flushes everything submitted before it and waits for every flush to return.
//
// Cost: no goroutine stands between Submit and the flushes. A Submit that finds a flusher
// idle wakes it (one hand-off); under load, a flusher that returns takes the next batch
// itself, and a Submit wakes nobody.
type Coalescer[T any] struct {
	size  func(T) int
	flush func([]T)
	cfg   CoalescerConfig
	wg    sync.WaitGroup

	// Under mu: the state. What always holds, between its critical sections:
	//   - queue is what was submitted and not yet taken, in order; len(queue) <= 2×MaxItems.
	//   - idle flushers wait on work; called of them were signalled and have not woken yet,
	//     and called <= 1 <= idle whenever called is 1.
	//   - busy flushers are flushing a batch; busy + idle <= MaxInFlight.
	//   - ready is false, or called is 1, or no flusher is idle: an item never waits while
	//     an eager slot is free, nor a backlog while any slot is, except for the woken
	//     flusher to take it.
	//   - a batch taken while EagerInFlight others are busy was taken from a backlog.
	//   - once closed, nothing more is queued, and the flushers return once queue is empty.
	mu     sync.Mutex
	queue  []T
	idle   int
	called int
	busy   int
	work   sync.Cond
	room   chan struct{} // closed when queue shrinks or at Close, for blocked Submits; nil when none waits
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
	if cfg.EagerInFlight <= 0 || cfg.EagerInFlight > cfg.MaxInFlight {
		cfg.EagerInFlight = cfg.MaxInFlight
	}
	if cfg.BacklogItems <= 0 {
		cfg.BacklogItems = defaultBacklogItems
	}
	c := &Coalescer[T]{size: size, flush: flush, cfg: cfg}
	c.work.L = &c.mu
	c.wg.Add(cfg.MaxInFlight)
	for range cfg.MaxInFlight {
		go c.flusher()
	}
	return c
}

// Submit hands item to the next batch. It blocks while 2×MaxItems items wait, until ctx ends.
// After Close it returns execstore.ErrClosed.
func (c *Coalescer[T]) Submit(ctx context.Context, item T) error {
	c.mu.Lock()
	for !c.closed && c.full() {
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if c.closed {
		return execstore.ErrClosed
	}
	c.add(item)
	return nil
}

// TrySubmit hands item to the next batch unless 2×MaxItems items wait or the Coalescer is
// closed, and reports whether it did. It never blocks.
func (c *Coalescer[T]) TrySubmit(item T) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.full() {
		return false
	}
	c.add(item)
	return true
}

// Busy reports whether items wait or a batch is being flushed.
func (c *Coalescer[T]) Busy() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue) > 0 || c.busy > 0
}

// Close flushes every submitted item and waits for all flushes to return.
func (c *Coalescer[T]) Close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		c.work.Broadcast()
		c.freed()
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// full reports whether the queue holds as many items as may wait. The caller holds mu.
func (c *Coalescer[T]) full() bool { return len(c.queue) >= 2*c.cfg.MaxItems }

// add queues item and wakes an idle flusher for it, unless one was woken already. The caller
// holds mu.
func (c *Coalescer[T]) add(item T) {
	c.queue = append(c.queue, item)
	c.call()
}

// call signals an idle flusher if a batch is ready and none was signalled. The caller holds
// mu.
func (c *Coalescer[T]) call() {
	if c.ready() && c.idle > 0 && c.called == 0 {
		c.called++
		c.work.Signal()
	}
}

// ready reports whether a free slot may take the next batch now: items wait, and fewer than
// EagerInFlight batches are being flushed, or the items make a backlog, or Close began. The
// caller holds mu.
func (c *Coalescer[T]) ready() bool {
	return len(c.queue) > 0 && (c.busy < c.cfg.EagerInFlight || len(c.queue) >= c.cfg.BacklogItems || c.closed)
}

// take removes the next batch from the head of the queue: up to MaxItems items, the one
// that reaches MaxBytes its last. The caller holds mu.
func (c *Coalescer[T]) take() []T {
	n, bytes := 0, 0
	for n < len(c.queue) && n < c.cfg.MaxItems && bytes < c.cfg.MaxBytes {
		bytes += c.size(c.queue[n])
		n++
	}
	batch := slices.Clone(c.queue[:n])
	rest := copy(c.queue, c.queue[n:])
	clear(c.queue[rest:])
	c.queue = c.queue[:rest]
	c.freed()
	return batch
}

// freed wakes the Submits waiting for room. The caller holds mu.
func (c *Coalescer[T]) freed() {
	if c.room != nil {
		close(c.room)
		c.room = nil
	}
}

// flusher is one of the MaxInFlight goroutines that flush: it takes the next batch, flushes
// it, and takes the next, waiting on work while no batch is ready, until Close empties the
// queue.
func (c *Coalescer[T]) flusher() {
	defer c.wg.Done()
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		for !c.ready() && !c.closed {
			c.idle++
			c.work.Wait()
			c.idle--
			if c.called > 0 {
				c.called--
			}
		}
		if len(c.queue) == 0 {
			return // closed, and nothing is left
		}
		batch := c.take()
		c.busy++
		c.call() // what is left goes out at once if it may and another flusher is idle
		c.mu.Unlock()
		c.flush(batch)
		c.mu.Lock()
		c.busy--
	}
}
