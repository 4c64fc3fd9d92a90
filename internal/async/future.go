package async

import (
	"context"
	"sync/atomic"

	"github.com/execstore/execstore/internal/workers"
)

// Future is the result of an operation submitted asynchronously.
type Future[T any] struct {
	done   chan struct{}
	val    T
	err    error
	env    *workers.Envelope
	hand   atomic.Pointer[Handoff] // set when a worker passes the operation to a coalescer
	handed chan struct{}           // closed when hand is set
	// settled, when set (before the operation can run), is told the outcome when the
	// future is settled: the operation's span ends there.
	settled func(error)
}

// newFuture returns the future of an operation travelling in env.
func newFuture[T any](env *workers.Envelope) *Future[T] {
	return &Future[T]{done: make(chan struct{}), env: env, handed: make(chan struct{})}
}

// HandTo records that the operation was passed on to a coalescer, and returns the Handoff
// through which its caller can still withdraw or abandon it. abandon gives the error of an
// operation abandoned after it was sent (for a write, an outcome-unknown error wrapping the
// context's); record is told every error the handoff settles the future with.
func (f *Future[T]) HandTo(abandon func(ctxErr error) error, record func(error)) *Handoff {
	h := &Handoff{abandon: abandon, withdraw: func(err error) {
		record(err)
		var zero T
		f.Set(zero, err)
	}}
	f.hand.Store(h)
	close(f.handed)
	return h
}

// Ready returns a future that is already done with v.
func Ready[T any](v T) *Future[T] {
	f := &Future[T]{done: make(chan struct{}), val: v}
	close(f.done)
	return f
}

// Failed returns a future that is already done with err.
func Failed[T any](err error) *Future[T] {
	f := &Future[T]{done: make(chan struct{}), err: err}
	close(f.done)
	return f
}

// Set settles the future. It is called exactly once: by the request's Run or Abort, or by
// whoever holds the operation's Handoff once it has won the right to settle it.
func (f *Future[T]) Set(v T, err error) {
	f.val, f.err = v, err
	if f.settled != nil {
		f.settled(err)
	}
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
		f.Set(zero, ctx.Err())
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
