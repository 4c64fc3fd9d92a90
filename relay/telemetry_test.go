package relay_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
)

// Every handler call is a span with the entry and its outcome — ok, withheld, or the
// handler's failure — and the relay records its lag and handling times.
func TestSpansAndMetrics(t *testing.T) {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })

	store := newMemstore(t)
	em := newEmitter(t, store)
	seq := em.emit("s", "t", "x")
	calls := 0
	r := relay.New(store, func(context.Context, execstore.OutboxEntry) error {
		calls++
		switch calls {
		case 1:
			return errors.New("boom")
		case 2:
			return relay.ErrLeavePending
		}
		return nil
	}, relay.Options{PollInterval: time.Hour, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
		TracerProvider: tp, MeterProvider: mp})
	stop := run(t, r)
	eventually(t, func() bool { return r.Stats().Acked == 1 }, "delivered at the third call")
	require.NoError(t, stop())

	var outcomes []string
	for _, sp := range spans.Ended() {
		require.Equal(t, "execstore.relay.deliver", sp.Name())
		for _, kv := range sp.Attributes() {
			switch kv.Key {
			case "execstore.outcome":
				outcomes = append(outcomes, kv.Value.AsString())
			case "execstore.id":
				assert.Equal(t, "outbox "+entryID("s", seq), kv.Value.AsString(), "the item as the CLI names it")
			}
		}
	}
	assert.Equal(t, []string{"error", "withheld", "ok"}, outcomes)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	seen := map[string]bool{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			seen[m.Name] = true
			if h, ok := m.Data.(metricdata.Histogram[float64]); ok {
				var n uint64
				for _, p := range h.DataPoints {
					n += p.Count
				}
				assert.EqualValues(t, 3, n, m.Name)
			}
		}
	}
	assert.True(t, seen["execstore.relay.lag"] && seen["execstore.relay.handle.duration"] && seen["execstore.relay.in_flight"], "%v", seen)
}
