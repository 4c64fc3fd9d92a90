package aio

import (
	"context"
	"errors"

	"github.com/execstore/execstore/pool"
)

// request is one operation travelling through the pool.
type request[T any] struct {
	env  pool.Envelope
	fut  *Future[T]
	kind opKind
	st   *Store
	run  func(ctx context.Context) (T, error)
}

// errSettledLater is returned by a run function that handed its operation on (to a group
// commit): the future is settled there, not by Run.
var errSettledLater = errors.New("settled later")

func (r *request[T]) Run(ctx context.Context) {
	v, err := r.run(ctx)
	if err == errSettledLater {
		return
	}
	r.st.stats.record(r.kind, err)
	r.fut.set(v, err)
}

func (r *request[T]) Abort(err error) {
	r.st.stats.record(r.kind, err)
	var zero T
	r.fut.set(zero, err)
}

// submit queues run as an operation of kind and returns its future.
func submit[T any](ctx context.Context, s *Store, kind opKind, run func(ctx context.Context) (T, error)) *Future[T] {
	return newRequest(s, kind, run).submit(ctx)
}

func newRequest[T any](s *Store, kind opKind, run func(ctx context.Context) (T, error)) *request[T] {
	r := &request[T]{kind: kind, st: s, run: run}
	r.fut = newFuture[T](&r.env)
	return r
}

// submit queues r and returns its future.
func (r *request[T]) submit(ctx context.Context) *Future[T] {
	s, kind := r.st, r.kind
	var err error
	if s.shed {
		err = s.pool.TrySubmit(ctx, &r.env, r)
	} else {
		err = s.pool.Submit(ctx, &r.env, r)
	}
	if err != nil {
		s.stats.record(kind, err)
		return failedFuture[T](err)
	}
	return r.fut
}
