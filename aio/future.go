package aio

import (
	"context"
	"sync/atomic"

	"github.com/execstore/execstore/pool"
)

// Future is the result of an operation submitted asynchronously.
type Future[T any] struct {
	done   chan struct{}
	val    T
	err    error
	env    *pool.Envelope
	hand   atomic.Pointer[handoff] // set when a worker passes the operation to a coalescer
	handed chan struct{}           // closed when hand is set
}

func newFuture[T any](env *pool.Envelope) *Future[T] {
	return &Future[T]{done: make(chan struct{}), env: env, handed: make(chan struct{})}
}

// handTo records that the operation was passed on to a coalescer, and returns the handoff
// through which its caller can still withdraw or abandon it.
func (f *Future[T]) handTo(abandon func(ctxErr error) error, record func(error)) *handoff {
	h := &handoff{abandon: abandon, withdraw: func(err error) {
		record(err)
		var zero T
		f.set(zero, err)
	}}
	f.hand.Store(h)
	close(f.handed)
	return h
}

func failedFuture[T any](err error) *Future[T] {
	f := &Future[T]{done: make(chan struct{}), err: err}
	close(f.done)
	return f
}

func (f *Future[T]) set(v T, err error) {
	f.val, f.err = v, err
	close(f.done)
}

// Done is closed when the result is ready.
func (f *Future[T]) Done() <-chan struct{} { return f.done }

// Wait returns the operation's result. If ctx ends while the operation still waits (in the
// request channel, or for a batch), the operation is withdrawn (it will never be sent) and
// Wait returns ctx.Err(). If ctx ends after a batch carrying the operation was sent, Wait
// returns at once: a write's error matches execstore.ErrOutcomeUnknown and wraps ctx.Err(), a
// read's is ctx.Err(). An operation a worker runs itself returns its result, which the context
// it was submitted with bounds.
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
	}
	if f.env != nil && f.env.Withdraw() {
		var zero T
		f.set(zero, ctx.Err())
		return f.val, f.err
	}
	select {
	case <-f.done:
	case <-f.handed:
		f.hand.Load().giveUp(ctx)
		<-f.done
	}
	return f.val, f.err
}

// Result returns the result of a completed operation; call it after Done is closed.
func (f *Future[T]) Result() (T, error) {
	<-f.done
	return f.val, f.err
}
