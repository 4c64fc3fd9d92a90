package aio

import (
	"context"

	"github.com/execstore/execstore/internal/async"
)

// submit queues run as an operation of kind concerning id ("" for none) and returns its
// future; the operation's span starts here and ends when the future is settled.
func submit[T any](ctx context.Context, s *Store, kind opKind, id string, run func(ctx context.Context) (T, error)) *Future[T] {
	r := newRequest(s, kind, run)
	ctx = traced(ctx, s, r, kind, id)
	return future(r.Submit(ctx, s.pool, s.shed))
}

// newRequest returns the request of run, recorded in the store's stats under kind.
func newRequest[T any](s *Store, kind opKind, run func(ctx context.Context) (T, error)) *async.Request[T] {
	return async.NewRequest(s.stats, int(kind), func(ctx context.Context) (T, error) { return run(withOperation(ctx, kind)) })
}

// traced starts the span of r, an operation of kind concerning id, as a child of ctx's, ends
// it when r's future is settled, and returns the context that carries it: r's caller submits
// r with it, and whatever r hands on (to a coalescer) is marked through it.
func traced[T any](ctx context.Context, s *Store, r *async.Request[T], kind opKind, id string) context.Context {
	if s.tel == nil {
		return ctx
	}
	ctx, span := s.tel.Start(ctx, opNames[kind], id)
	r.OnSettled(span.End)
	return ctx
}
