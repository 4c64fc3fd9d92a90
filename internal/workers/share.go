package workers

import (
	"context"
	"sync"

	"github.com/execstore/execstore"
)

// Share is one user's share of a Pool that several users (stores opened on one client, say)
// run their operations on, so that one bound holds for the whole process. Its Submit and
// TrySubmit go to the pool; its Close refuses its later submits and waits for the tasks it
// submitted, leaving the pool running for the others. The pool's owner closes the pool once
// every share is closed.
type Share struct {
	p      *Pool
	mu     sync.RWMutex
	closed bool
	tasks  sync.WaitGroup // tasks submitted through the share and not yet run, aborted or withdrawn
}

// Share returns a new share of p.
func (p *Pool) Share() *Share { return &Share{p: p} }

// Submit is Pool.Submit through the share; after the share's Close it returns ErrClosed.
func (s *Share) Submit(ctx context.Context, e *Envelope, t Task) error {
	return s.submit(ctx, e, t, s.p.Submit)
}

// TrySubmit is Pool.TrySubmit through the share; after the share's Close it returns ErrClosed.
func (s *Share) TrySubmit(ctx context.Context, e *Envelope, t Task) error {
	return s.submit(ctx, e, t, s.p.TrySubmit)
}

func (s *Share) submit(ctx context.Context, e *Envelope, t Task, submit func(context.Context, *Envelope, Task) error) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return execstore.ErrClosed
	}
	s.tasks.Add(1)
	s.mu.RUnlock()
	e.share = s
	if err := submit(ctx, e, t); err != nil {
		s.tasks.Done()
		return err
	}
	return nil
}

// Len returns the number of tasks of the whole pool waiting in the channel.
func (s *Share) Len() int { return s.p.Len() }

// InFlight returns the number of tasks of the whole pool running.
func (s *Share) InFlight() int { return s.p.InFlight() }

// Close refuses the share's later submits and waits until every task it submitted has run,
// been aborted or been withdrawn, or until ctx ends (ctx.Err(): those tasks then go on, under
// their own contexts). The pool itself keeps running. Calling Close again waits the same way.
func (s *Share) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.tasks.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Runner is what runs a store's operations: a Pool of its own, or its Share of one.
type Runner interface {
	Submit(ctx context.Context, e *Envelope, t Task) error
	TrySubmit(ctx context.Context, e *Envelope, t Task) error
	Close(ctx context.Context) error
	Len() int
	InFlight() int
}

// NewRunner returns a new Share of shared when it is set, else a new Pool sized by cfg.
func NewRunner(shared *Pool, cfg Config) Runner {
	return newRunner(shared, cfg)
}

// Public is set by package pool: the Pool behind a *pool.Pool (nil for a nil one), so that a
// store can run on a pool its user shares without the public type showing the machinery.
var Public func(shared any) *Pool

// RunnerFor returns a new Share of the Pool behind shared, a *pool.Pool, when it is non-nil,
// else a new Pool sized by cfg.
func RunnerFor(shared any, cfg Config) Runner {
	var p *Pool
	if Public != nil {
		p = Public(shared)
	}
	return newRunner(p, cfg)
}

func newRunner(shared *Pool, cfg Config) Runner {
	if shared != nil {
		return shared.Share()
	}
	return New(cfg)
}
