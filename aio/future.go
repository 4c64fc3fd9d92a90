package aio

import (
	"context"

	"github.com/execstore/execstore/pool"
)

// Future is the result of an operation submitted asynchronously.
type Future[T any] struct {
	done chan struct{}
	val  T
	err  error
	env  *pool.Envelope
}

func newFuture[T any](env *pool.Envelope) *Future[T] {
	return &Future[T]{done: make(chan struct{}), env: env}
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

// Wait returns the operation's result. If ctx ends while the operation still waits in the
// request channel, the operation is withdrawn (it will never be sent) and Wait returns
// ctx.Err(). Once a worker has started the operation, Wait returns its result, which the
// operation's own context (the one it was submitted with) bounds.
func (f *Future[T]) Wait(ctx context.Context) (T, error) {
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
	}
	if f.env != nil && f.env.Withdraw() {
		var zero T
		f.set(zero, ctx.Err())
	}
	<-f.done
	return f.val, f.err
}

// Result returns the result of a completed operation; call it after Done is closed.
func (f *Future[T]) Result() (T, error) {
	<-f.done
	return f.val, f.err
}
