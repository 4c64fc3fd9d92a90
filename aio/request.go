package aio

import (
	"context"

	"github.com/execstore/execstore/internal/async"
)

// submit queues run as an operation of kind and returns its future.
func submit[T any](ctx context.Context, s *Store, kind opKind, run func(ctx context.Context) (T, error)) *Future[T] {
	return future(newRequest(s, kind, run).Submit(ctx, s.pool, s.shed))
}

// newRequest returns the request of run, recorded in the store's stats under kind.
func newRequest[T any](s *Store, kind opKind, run func(ctx context.Context) (T, error)) *async.Request[T] {
	return async.NewRequest(s.stats, int(kind), run)
}
