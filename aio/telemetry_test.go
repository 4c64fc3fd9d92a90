package aio_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/server"
)

// otelKit is an SDK tracer provider recording every span and a meter provider read by hand.
type otelKit struct {
	spans  *tracetest.SpanRecorder
	reader *sdkmetric.ManualReader
	conn   server.Connection
}

func newOtelKit(t *testing.T, database string) *otelKit {
	k := &otelKit{spans: tracetest.NewSpanRecorder(), reader: sdkmetric.NewManualReader()}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(k.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(k.reader))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()); _ = mp.Shutdown(context.Background()) })
	k.conn = server.Connection{Database: database, TracerProvider: tp, MeterProvider: mp}
	return k
}

// spans returns the ended spans named name.
func (k *otelKit) spansNamed(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range k.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func attr(s sdktrace.ReadOnlySpan, key string) attribute.Value {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// metric returns the data points of the metric named name, by their outcome attribute.
func (k *otelKit) histogramCounts(t *testing.T, name string) map[string]uint64 {
	var rm metricdata.ResourceMetrics
	require.NoError(t, k.reader.Collect(context.Background(), &rm))
	out := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != name {
				continue
			}
			switch d := m.Data.(type) {
			case metricdata.Histogram[float64]:
				for _, p := range d.DataPoints {
					op, _ := p.Attributes.Value("db.operation.name")
					outcome, _ := p.Attributes.Value("execstore.outcome")
					out[op.AsString()+"/"+outcome.AsString()] += p.Count
				}
			case metricdata.Histogram[int64]:
				for _, p := range d.DataPoints {
					out["batches"] += p.Count
				}
			case metricdata.Sum[int64]:
				for _, p := range d.DataPoints {
					out["sum"] += uint64(p.Value)
				}
			case metricdata.Gauge[int64]:
				out["gauge"] = uint64(len(d.DataPoints))
			}
		}
	}
	return out
}

// A store given the SDK's providers makes a span per operation, with the execution's id, the
// database and the outcome — a won commit, a conflict (an answer: no error status), a group
// commit's batch size — and records db.client.operation.duration by operation and outcome,
// the batch sizes and the queue gauges.
func TestSpansAndMetrics(t *testing.T) {
	h := newHarness(t, aio.Options{})
	k := newOtelKit(t, h.opts.Database)
	s := h.reopen(t, aio.Options{Connection: k.conn})

	e := newExe("e")
	require.NoError(t, s.Save(bg, e))
	stale := *e
	_, err := s.Commit(bg, e, execstore.Commit{})
	require.NoError(t, err)
	_, err = s.Commit(bg, &stale, execstore.Commit{})
	require.ErrorIs(t, err, execstore.ErrConflict)
	var wg sync.WaitGroup
	for i := range 8 { // concurrent commits of distinct executions: grouped
		x := newExe("g" + string(rune('a'+i)))
		require.NoError(t, s.Save(bg, x))
		wg.Go(func() {
			_, err := s.Commit(bg, x, execstore.Commit{})
			assert.NoError(t, err)
		})
	}
	wg.Wait()

	commits := k.spansNamed("execstore.aio.commit")
	require.Len(t, commits, 1+2+8+8, "a span per commit")
	outcomes := map[string]int{}
	for _, sp := range commits {
		outcomes[attr(sp, "execstore.outcome").AsString()]++
		assert.Equal(t, "mongodb", attr(sp, "db.system.name").AsString())
		assert.Equal(t, h.opts.Database, attr(sp, "db.namespace").AsString())
		assert.Equal(t, "commit", attr(sp, "db.operation.name").AsString())
		if attr(sp, "execstore.outcome").AsString() == "conflict" {
			assert.Equal(t, "e", attr(sp, "execstore.id").AsString())
			assert.NotEqual(t, codes.Error, sp.Status().Code, "a conflict is an answer, not an error")
		}
	}
	assert.Equal(t, map[string]int{"ok": 18, "conflict": 1}, outcomes)
	batched := 0
	for _, sp := range commits {
		if attr(sp, "execstore.batch.size").AsInt64() > 0 {
			batched++
		}
	}
	assert.Positive(t, batched, "grouped commits carry their batch's size")

	durations := k.histogramCounts(t, "db.client.operation.duration")
	assert.EqualValues(t, 18, durations["commit/ok"])
	assert.EqualValues(t, 1, durations["commit/conflict"])
	assert.Positive(t, k.histogramCounts(t, "execstore.batch.size")["batches"])
	assert.EqualValues(t, 1, k.histogramCounts(t, "execstore.queue.depth")["gauge"])
	assert.EqualValues(t, 1, k.histogramCounts(t, "execstore.operations.in_flight")["gauge"])
}

// A commit whose answer is lost is an unknown outcome: its span says so with an error
// status, and execstore.outcome.unknown counts it.
func TestSpanOfUnknownOutcome(t *testing.T) {
	proxy, uri := proxied(t)
	h := newHarness(t, aio.Options{})
	k := newOtelKit(t, h.opts.Database)
	s, err := aio.Open(bg, uri, aio.Options{DisableRemoteWakes: proxiedStall, Connection: k.conn, DisableGroupCommit: true})
	require.NoError(t, err)
	defer s.Close(bg)
	e := newExe("e")
	require.NoError(t, s.Save(bg, e))

	proxy.AnswersStalled.Store(true)
	f := s.CommitAsync(bg, e, execstore.Commit{})
	h.awaitVersion(t, "e", 2) // sent, and applied; its answer is held
	proxy.CloseAll()
	proxy.AnswersStalled.Store(false)
	_, err = f.Wait(bg)
	require.ErrorIs(t, err, execstore.ErrOutcomeUnknown)

	var unknown []sdktrace.ReadOnlySpan
	for _, sp := range k.spansNamed("execstore.aio.commit") {
		if attr(sp, "execstore.outcome").AsString() == "unknown" {
			unknown = append(unknown, sp)
		}
	}
	require.Len(t, unknown, 1)
	assert.Equal(t, codes.Error, unknown[0].Status().Code)
	assert.Equal(t, "unknown", attr(unknown[0], "error.type").AsString())
	assert.EqualValues(t, 1, k.histogramCounts(t, "execstore.outcome.unknown")["sum"])
}
