package aio

import (
	"context"
	"testing"

	"github.com/execstore/execstore/internal/workers"
)

// BenchmarkDispatch measures the client's own cost of one operation: validation aside, the
// request, its future, the hop through the request channel to a worker and back. The
// operation itself does nothing, so no server is involved.
func BenchmarkDispatch(b *testing.B) {
	s := &Store{pool: workers.New(workers.Config{}), stats: newStatCounters()}
	defer s.pool.Close(context.Background())
	ctx := context.Background()
	noop := func(context.Context) (int, error) { return 1, nil }
	b.Run("wait", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := submit(ctx, s, opLoad, noop).Wait(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pipelined", func(b *testing.B) {
		b.ReportAllocs()
		futures := make([]*Future[int], 0, 256)
		for i := range b.N {
			futures = append(futures, submit(ctx, s, opLoad, noop))
			if len(futures) == cap(futures) || i == b.N-1 {
				for _, f := range futures {
					_, _ = f.Result()
				}
				futures = futures[:0]
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := submit(ctx, s, opLoad, noop).Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	})
}
