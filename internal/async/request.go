package async

import (
	"context"
	"errors"

	"github.com/execstore/execstore/internal/workers"
)

// Recorder is told the outcome of every operation of a kind, for a store's statistics.
type Recorder interface {
	Record(kind int, err error)
}

// Submitter is where requests go: a pool, or a store's share of one.
type Submitter interface {
	Submit(ctx context.Context, e *workers.Envelope, t workers.Task) error
	TrySubmit(ctx context.Context, e *workers.Envelope, t workers.Task) error
}

// Request is one operation travelling through a pool: its run function, the future its caller
// waits on, and what its outcome is recorded as.
type Request[T any] struct {
	env  workers.Envelope
	fut  *Future[T]
	kind int
	rec  Recorder
	run  func(ctx context.Context) (T, error)
}

// ErrSettledLater is returned by a run function that handed its operation on (to a
// coalescer): the future is settled there, through the operation's Handoff, not by Run.
var ErrSettledLater = errors.New("settled later")

// NewRequest returns the request of run, recorded under kind.
func NewRequest[T any](rec Recorder, kind int, run func(ctx context.Context) (T, error)) *Request[T] {
	r := &Request[T]{kind: kind, rec: rec, run: run}
	r.fut = newFuture[T](&r.env)
	return r
}

// OnSettled makes settled be told the operation's outcome when its future is settled, or at
// once when Submit refuses it. Call it before Submit.
func (r *Request[T]) OnSettled(settled func(error)) { r.fut.settled = settled }

// Future returns the request's future.
func (r *Request[T]) Future() *Future[T] { return r.fut }

// Run runs the operation on a worker; see workers.Task.
func (r *Request[T]) Run(ctx context.Context) {
	v, err := r.run(ctx)
	if err == ErrSettledLater {
		return
	}
	r.rec.Record(r.kind, err)
	r.fut.Set(v, err)
}

// Abort settles an operation that will never run; see workers.Task.
func (r *Request[T]) Abort(err error) {
	r.rec.Record(r.kind, err)
	var zero T
	r.fut.Set(zero, err)
}

// Submit queues r on s and returns its future: the queue's refusal (the context's error,
// ErrClosed, or with shed ErrOverloaded at once when the queue is full) comes back as a
// future that is already done.
func (r *Request[T]) Submit(ctx context.Context, s Submitter, shed bool) *Future[T] {
	var err error
	if shed {
		err = s.TrySubmit(ctx, &r.env, r)
	} else {
		err = s.Submit(ctx, &r.env, r)
	}
	if err != nil {
		r.rec.Record(r.kind, err)
		if r.fut.settled != nil {
			r.fut.settled(err)
		}
		return Failed[T](err)
	}
	return r.fut
}
