// Package workers runs operations submitted on a bounded request channel on a bounded set of
// goroutines: the machinery behind package pool, which every store runs its operations on.
//
// What always holds:
//   - At most Workers tasks run at once; at most QueueDepth wait in the channel, plus one
//     taken off it that waits for a free worker. A task is run at most once, and exactly one
//     of Run or Abort is called for every accepted task that is not withdrawn; the one
//     exception is a Run that panics, which is followed by Abort with the panic.
//   - Submit blocks while the channel is full, for as long as its context allows, so
//     backpressure lands on the producer; TrySubmit never blocks and returns
//     execstore.ErrOverloaded instead.
//   - A task whose context ended while it waited in the channel is never run: it is aborted
//     with the context's error. A waiting caller can withdraw its task (Withdraw) as long as no
//     worker has claimed it, which is how a caller gets its context error on time even when
//     every worker is busy. A task is claimed only when a worker is free to run it.
//   - After Close starts, Submit and TrySubmit return execstore.ErrClosed; everything already
//     accepted is still run. If Close's context ends first, running tasks see their context
//     cancelled and queued ones are aborted with execstore.ErrClosed; either way no goroutine
//     of the pool outlives Close.
//
// Cost: one channel send and one receive per task, plus a hand-off to a worker goroutine that
// is reused (sourcegraph/conc's pool). Beyond the caller's Envelope, a task that runs costs
// five small allocations (about 250 bytes): the hand-off closure and the cancellable context
// that Close cancels. A task aborted or withdrawn before it leaves the channel allocates
// nothing.
package workers

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	concpool "github.com/sourcegraph/conc/pool"

	"github.com/execstore/execstore"
)

// Defaults of Config.
const (
	DefaultWorkers    = 32
	DefaultQueueDepth = 1024
)

// Config sizes a Pool.
type Config struct {
	Workers    int // tasks running at once; default DefaultWorkers
	QueueDepth int // tasks waiting in the channel; default DefaultQueueDepth
}

// Task is one operation.
type Task interface {
	// Run performs the operation. ctx is the submitter's context, additionally cancelled when
	// Close gives up waiting.
	Run(ctx context.Context)
	// Abort is called instead of Run when the task will never run: its context ended while it
	// was queued (err is the context's error), or the pool closed under it (ErrClosed). It is
	// also called after Run panics, with an error carrying the panic value.
	Abort(err error)
}

// Envelope carries one task through the channel. Embed it or allocate one per submit; it must
// not be reused.
type Envelope struct {
	ctx   context.Context
	task  Task
	state atomic.Int32
	share *Share // the share it was submitted through; nil for the pool itself
}

const (
	stateQueued int32 = iota
	stateClaimed
	stateWithdrawn
)

// Withdraw takes the task back if no worker has claimed it yet, and reports whether it did.
// A withdrawn task is neither run nor aborted.
func (e *Envelope) Withdraw() bool {
	if !e.state.CompareAndSwap(stateQueued, stateWithdrawn) {
		return false
	}
	if e.share != nil {
		e.share.tasks.Done()
	}
	return true
}

// Pool is a bounded request channel served by a bounded set of workers. Create it with New.
type Pool struct {
	queue    chan *Envelope
	workers  *concpool.Pool
	stop     context.Context // cancelled when Close gives up
	stopNow  context.CancelFunc
	mu       sync.Mutex
	closed   bool
	closing  chan struct{}
	senders  sync.WaitGroup
	drained  chan struct{}
	inFlight atomic.Int64
}

// New starts a pool.
func New(cfg Config) *Pool {
	if cfg.Workers <= 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.QueueDepth <= 0 {
		cfg.QueueDepth = DefaultQueueDepth
	}
	p := &Pool{
		queue:   make(chan *Envelope, cfg.QueueDepth),
		workers: concpool.New().WithMaxGoroutines(cfg.Workers),
		closing: make(chan struct{}),
		drained: make(chan struct{}),
	}
	p.stop, p.stopNow = context.WithCancel(context.Background())
	go p.dispatch()
	return p
}

// Submit queues t, blocking while the channel is full until ctx ends (ctx.Err()) or the pool
// closes (ErrClosed). On success exactly one of t.Run and t.Abort will be called, unless the
// caller withdraws e first.
func (p *Pool) Submit(ctx context.Context, e *Envelope, t Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.enter(); err != nil {
		return err
	}
	defer p.senders.Done()
	e.ctx, e.task = ctx, t
	select {
	case p.queue <- e:
		return nil
	default:
	}
	select {
	case p.queue <- e:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-p.closing:
		return execstore.ErrClosed
	}
}

// TrySubmit queues t if the channel has room, and returns ErrOverloaded at once otherwise.
func (p *Pool) TrySubmit(ctx context.Context, e *Envelope, t Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := p.enter(); err != nil {
		return err
	}
	defer p.senders.Done()
	e.ctx, e.task = ctx, t
	select {
	case p.queue <- e:
		return nil
	default:
		return execstore.ErrOverloaded
	}
}

func (p *Pool) enter() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return execstore.ErrClosed
	}
	p.senders.Add(1)
	return nil
}

func (p *Pool) dispatch() {
	defer close(p.drained)
	for e := range p.queue {
		if e.state.Load() == stateWithdrawn {
			continue
		}
		if p.stop.Err() != nil || e.ctx.Err() != nil {
			p.run(e) // only aborts: not worth a worker
			continue
		}
		// Go blocks while every worker is busy. e stays unclaimed until a worker picks it
		// up, so its caller can still withdraw it meanwhile.
		p.workers.Go(func() { p.run(e) })
	}
	p.workers.Wait()
}

// run claims e and runs or aborts it.
func (p *Pool) run(e *Envelope) {
	if !e.state.CompareAndSwap(stateQueued, stateClaimed) {
		return // withdrawn by its caller
	}
	if sh := e.share; sh != nil {
		defer sh.tasks.Done()
	}
	if p.stop.Err() != nil {
		e.task.Abort(execstore.ErrClosed)
		return
	}
	if err := e.ctx.Err(); err != nil {
		e.task.Abort(err)
		return
	}
	p.inFlight.Add(1)
	defer p.inFlight.Add(-1)
	ctx, cancel := context.WithCancel(e.ctx)
	stop := context.AfterFunc(p.stop, cancel)
	defer func() {
		stop()
		cancel()
		if r := recover(); r != nil {
			e.task.Abort(fmt.Errorf("execstore: operation panicked: %v", r))
		}
	}()
	e.task.Run(ctx)
}

// Len returns the number of tasks waiting in the channel.
func (p *Pool) Len() int { return len(p.queue) }

// InFlight returns the number of tasks running.
func (p *Pool) InFlight() int { return int(p.inFlight.Load()) }

// Close stops accepting tasks and waits until every accepted one has run or been aborted. If
// ctx ends first, it cancels the running tasks' contexts, aborts the queued ones, waits for
// the workers to return and then returns ctx.Err(). Calling Close again waits the same way.
func (p *Pool) Close(ctx context.Context) error {
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.closing)
		p.mu.Unlock()
		p.senders.Wait()
		close(p.queue)
	} else {
		p.mu.Unlock()
	}
	select {
	case <-p.drained:
		p.stopNow()
		return nil
	case <-ctx.Done():
		p.stopNow()
		<-p.drained
		return ctx.Err()
	}
}
