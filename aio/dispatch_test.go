package aio

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/workers"
)

// dispatchStores are the stores the dispatch path is measured on: without telemetry, with
// OpenTelemetry's no-op providers, and with the SDK's (spans to an in-memory recorder,
// metrics to a manual reader).
func dispatchStores(tb testing.TB) map[string]*Store {
	out := map[string]*Store{}
	for name, tel := range map[string]func(g telemetry.Gauges) *telemetry.Telemetry{
		"none": func(telemetry.Gauges) *telemetry.Telemetry { return nil },
		"global providers, no SDK": func(g telemetry.Gauges) *telemetry.Telemetry {
			return telemetry.New("aio", "db", "executions", nil, nil, g)
		},
		"noop providers": func(g telemetry.Gauges) *telemetry.Telemetry {
			return telemetry.New("aio", "db", "executions", tracenoop.NewTracerProvider(), metricnoop.NewMeterProvider(), g)
		},
		"sdk": func(g telemetry.Gauges) *telemetry.Telemetry {
			tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tb.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
			return telemetry.New("aio", "db", "executions", tp, mp, g)
		},
	} {
		s := &Store{pool: workers.New(workers.Config{}), stats: newStatCounters()}
		s.tel = tel(s.pool)
		tb.Cleanup(func() { _ = s.pool.Close(context.Background()) })
		out[name] = s
	}
	return out
}

// BenchmarkDispatch measures the client's own cost of one operation: validation aside, the
// request, its future, the hop through the request channel to a worker and back, and its
// telemetry. The operation itself does nothing, so no server is involved.
func BenchmarkDispatch(b *testing.B) {
	ctx := context.Background()
	noop := func(context.Context) (int, error) { return 1, nil }
	for name, s := range dispatchStores(b) {
		b.Run(name+"/wait", func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				if _, err := submit(ctx, s, opLoad, "e", noop).Wait(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/pipelined", func(b *testing.B) {
			b.ReportAllocs()
			futures := make([]*Future[int], 0, 256)
			for i := range b.N {
				futures = append(futures, submit(ctx, s, opLoad, "e", noop))
				if len(futures) == cap(futures) || i == b.N-1 {
					for _, f := range futures {
						_, _ = f.Result()
					}
					futures = futures[:0]
				}
			}
		})
		b.Run(name+"/parallel", func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := submit(ctx, s, opLoad, "e", noop).Wait(ctx); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// With OpenTelemetry's no-op providers, and with the global ones while no SDK is installed
// (the default), the dispatch path allocates exactly what it does with no telemetry at all;
// with the SDK's it allocates more (the span and its attributes).
func TestDispatchAllocationsWithNoopProviders(t *testing.T) {
	ctx := context.Background()
	noop := func(context.Context) (int, error) { return 1, nil }
	allocs := map[string]float64{}
	for name, s := range dispatchStores(t) {
		allocs[name] = testing.AllocsPerRun(200, func() {
			if _, err := submit(ctx, s, opLoad, "e", noop).Wait(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
	assert.Equal(t, allocs["none"], allocs["noop providers"], "%v", allocs)
	assert.Equal(t, allocs["none"], allocs["global providers, no SDK"], "%v", allocs)
	assert.Greater(t, allocs["sdk"], allocs["none"], "%v", allocs)
}
