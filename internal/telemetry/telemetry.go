// Package telemetry is the module's one instrumentation with OpenTelemetry's API: a span per
// store operation and the metrics every store records, from the TracerProvider and the
// MeterProvider a store is given (the global ones by default, which do nothing until a
// program installs an SDK). The library uses the API alone; the SDK is the program's.
//
// What always holds:
//   - A span per operation, named "execstore.<store>.<op>" (for example
//     "execstore.aio.commit"), of kind client, carrying db.system.name "mongodb",
//     db.namespace (the database), db.collection.name, db.operation.name, the id the
//     operation concerns (AttrID) and its outcome (AttrOutcome: "ok", "conflict",
//     "already_processed", "unknown", "invalid", "overloaded", "closed", "not_found",
//     "canceled", "error"); a failure also sets error.type and the span's error status, except
//     a conflict or an already-processed event, which are answers.
//   - The metric db.client.operation.duration (seconds, OpenTelemetry's semantic convention
//     for database clients), by db.operation.name and outcome, and the store's own:
//     execstore.outcome.unknown (writes whose outcome is unknown), execstore.batch.size
//     (operations per coalesced batch), execstore.queue.depth and
//     execstore.operations.in_flight (gauges, from the store's pool).
//   - Given providers that are OpenTelemetry's no-op ones (trace/noop, metric/noop), or left
//     to the global ones while the program has installed no SDK when the store is opened,
//     Start does nothing and costs no allocation: the store's hot path is what it is without
//     telemetry. A program installs its SDK (otel.SetTracerProvider, otel.SetMeterProvider)
//     before it opens its stores, or gives them its providers.
package telemetry

import (
	"context"
	"errors"
	"reflect"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/execstore/execstore"
)

// Attributes of the module's own.
const (
	// AttrID is the execution id, idempotency key or invocation id an operation concerns.
	AttrID = attribute.Key("execstore.id")
	// AttrOutcome is how an operation ended (see the package doc).
	AttrOutcome = attribute.Key("execstore.outcome")
	// AttrBatchSize is the number of operations of the coalesced batch (a group commit's
	// bulk write) an operation rode in.
	AttrBatchSize = attribute.Key("execstore.batch.size")
)

// scope is the instrumentation scope's name.
const scope = "github.com/execstore/execstore"

// Telemetry instruments one store. A nil *Telemetry instruments nothing.
type Telemetry struct {
	store    string
	tracer   trace.Tracer
	kind     trace.SpanKind
	base     []attribute.KeyValue // on every span: db.system.name, db.namespace, db.collection.name
	measured []attribute.KeyValue // on every duration: db.system.name, db.namespace (a store's)
	duration metric.Float64Histogram
	unknown  metric.Int64Counter
	batch    metric.Int64Histogram
	lag      metric.Float64Histogram // a relay's
	dead     metric.Int64Counter     // a relay's
	handled  metric.Int64Counter     // a relay's: handler calls that returned nil
	failed   metric.Int64Counter     // a relay's: handler calls that returned an error
	retained metric.Int64Counter     // a relay's
	meter    metric.Meter
}

// Gauges are what a store's pool reports of its queue.
type Gauges interface {
	Len() int
	InFlight() int
}

// New returns the instruments of store ("aio", "idem", "journal", "relay") on database and
// collection, from tp and mp (nil: the global providers), with the queue of g observed; nil
// when both providers are OpenTelemetry's no-op ones.
func New(store, database, collection string, tp trace.TracerProvider, mp metric.MeterProvider, g Gauges) *Telemetry {
	tp, mp, ok := providers(tp, mp)
	if !ok {
		return nil
	}
	t := &Telemetry{store: store, tracer: tp.Tracer(scope), kind: trace.SpanKindClient, meter: mp.Meter(scope),
		base: []attribute.KeyValue{attribute.String("db.system.name", "mongodb"),
			attribute.String("db.namespace", database), attribute.String("db.collection.name", collection)}}
	t.measured = t.base[:2]
	// Creating an instrument fails only for a name or unit the API refuses, which these are
	// not; a failed one is OpenTelemetry's no-op instrument all the same.
	t.duration, _ = t.meter.Float64Histogram("db.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of database client operations."),
		metric.WithExplicitBucketBoundaries(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10))
	t.unknown, _ = t.meter.Int64Counter("execstore.outcome.unknown",
		metric.WithDescription("Writes whose outcome is unknown: read them back before anything else."))
	t.batch, _ = t.meter.Int64Histogram("execstore.batch.size",
		metric.WithDescription("Operations per coalesced batch (a group commit's bulk write)."))
	if g != nil {
		attrs := metric.WithAttributes(attribute.String("execstore.store", store))
		_, _ = t.meter.Int64ObservableGauge("execstore.queue.depth",
			metric.WithDescription("Requests waiting for a worker."),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(int64(g.Len()), attrs)
				return nil
			}))
		_, _ = t.meter.Int64ObservableGauge("execstore.operations.in_flight",
			metric.WithDescription("Operations running."),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(int64(g.InFlight()), attrs)
				return nil
			}))
	}
	return t
}

// providers returns tp and mp, the global ones for nil, and whether they may record anything:
// false when neither can, each being OpenTelemetry's no-op provider or the global one while no
// program has installed an SDK in its place (its placeholder records nothing, but a span
// started on it still costs allocations).
func providers(tp trace.TracerProvider, mp metric.MeterProvider) (trace.TracerProvider, metric.MeterProvider, bool) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	_, noopTraces := tp.(tracenoop.TracerProvider)
	_, noopMetrics := mp.(metricnoop.MeterProvider)
	noTraces := noopTraces || placeholder(tp)
	noMetrics := noopMetrics || placeholder(mp)
	return tp, mp, !(noTraces && noMetrics)
}

// placeholder reports whether p is OpenTelemetry's global provider before an SDK was set:
// the internal types otel.GetTracerProvider and otel.GetMeterProvider return until
// otel.SetTracerProvider and otel.SetMeterProvider are called. (TestGlobalPlaceholders pins
// their names to the OpenTelemetry release in go.mod.)
func placeholder(p any) bool {
	switch reflect.TypeOf(p).String() {
	case "*global.tracerProvider", "*global.meterProvider":
		return true
	}
	return false
}

// NewRelay returns the instruments of a relay.Relay or relay.Sweeper (component "relay" or
// "sweeper"): a span per handled item ("execstore.relay.deliver", "execstore.sweeper.fire"),
// of kind consumer, with the item and its outcome ("ok", "withheld", or a failure's); the
// metrics execstore.relay.handle.duration, execstore.relay.lag (seconds from the scan
// that found an item to its handler's start), execstore.relay.delivered and
// execstore.relay.failed (handler calls that returned nil, or an error) and
// execstore.relay.dead (items moved to dead), by component, and execstore.relay.in_flight
// (a gauge, from inFlight); nil when both providers are OpenTelemetry's no-op ones.
func NewRelay(component string, tp trace.TracerProvider, mp metric.MeterProvider, inFlight func() int64,
	backlog func() []BacklogPoint) *Telemetry {
	tp, mp, ok := providers(tp, mp)
	if !ok {
		return nil
	}
	t := &Telemetry{store: component, tracer: tp.Tracer(scope), kind: trace.SpanKindConsumer, meter: mp.Meter(scope),
		measured: []attribute.KeyValue{attribute.String("execstore.component", component)}}
	t.duration, _ = t.meter.Float64Histogram("execstore.relay.handle.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of a relay's or sweeper's handler calls."))
	t.lag, _ = t.meter.Float64Histogram("execstore.relay.lag", metric.WithUnit("s"),
		metric.WithDescription("Time from the scan that found an item to its handler's start."))
	t.dead, _ = t.meter.Int64Counter("execstore.relay.dead",
		metric.WithDescription("Items moved to dead after their deliveries failed."))
	t.handled, _ = t.meter.Int64Counter("execstore.relay.delivered",
		metric.WithDescription("Handler calls that returned nil: items delivered, to be acked."))
	t.failed, _ = t.meter.Int64Counter("execstore.relay.failed",
		metric.WithDescription("Handler calls that returned an error (not ErrLeavePending): failed deliveries."))
	t.retained, _ = t.meter.Int64Counter(RetentionDeleted, metric.WithDescription(RetentionDeletedDescription))
	t.unknown, _ = t.meter.Int64Counter("execstore.outcome.unknown")
	t.batch, _ = t.meter.Int64Histogram("execstore.batch.size")
	_, _ = t.meter.Int64ObservableGauge("execstore.relay.in_flight",
		metric.WithDescription("Items held: queued in a lane, in a handler, or awaiting their ack."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(inFlight(), metric.WithAttributes(t.measured...))
			return nil
		}))
	t.backlogGauges(backlog)
	return t
}

// BacklogPoint is one partition's backlog as a relay's last scan of it found it, and its
// dead items as last counted.
type BacklogPoint struct {
	Partition int
	Holder    string
	Scanned   bool // Items, AtLeast and Age are a scan's: false before the first
	Items     int64
	AtLeast   bool          // the scan stopped at its limit
	Age       time.Duration // the oldest item's wait; negative when not known
	Dead      int64         // the dead items; negative when not counted
}

// backlogGauges registers the relay's backlog gauges: execstore.backlog.items,
// execstore.backlog.age and execstore.backlog.dead, one point per partition the relay holds
// (scanned, or counted), read from backlog when a reader collects.
func (t *Telemetry) backlogGauges(backlog func() []BacklogPoint) {
	attrs := func(p BacklogPoint) metric.MeasurementOption {
		return metric.WithAttributes(append(append([]attribute.KeyValue{}, t.measured...),
			attribute.Int("execstore.partition", p.Partition), attribute.String("execstore.holder", p.Holder))...)
	}
	_, _ = t.meter.Int64ObservableGauge("execstore.backlog.items",
		metric.WithDescription("Items waiting in a partition the relay holds (pending entries, or due timers), as its last scan of it found them; at least that many when execstore.backlog.at_least is true."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, p := range backlog() {
				if p.Scanned {
					o.Observe(p.Items, attrs(p), metric.WithAttributes(attribute.Bool("execstore.backlog.at_least", p.AtLeast)))
				}
			}
			return nil
		}))
	_, _ = t.meter.Float64ObservableGauge("execstore.backlog.age", metric.WithUnit("s"),
		metric.WithDescription("How long the oldest item its last scan found waiting in a partition the relay holds has waited: an entry since its commit, a timer since its fire time; 0 when none waits."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			for _, p := range backlog() {
				if p.Scanned && p.Age >= 0 {
					o.Observe(p.Age.Seconds(), attrs(p))
				}
			}
			return nil
		}))
	_, _ = t.meter.Int64ObservableGauge("execstore.backlog.dead",
		metric.WithDescription("Dead items of a partition the relay holds, of every kind, as last counted (every DeadCountInterval) plus those it moved to dead since."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, p := range backlog() {
				if p.Dead >= 0 {
					o.Observe(p.Dead, attrs(p))
				}
			}
			return nil
		}))
}

// Lag records that an item waited d between the scan that found it and its handler's start.
func (t *Telemetry) Lag(d time.Duration) {
	if t == nil || t.lag == nil {
		return
	}
	t.lag.Record(context.Background(), d.Seconds(), metric.WithAttributes(t.measured...))
}

// RetentionDeleted is the counter of what retention deleted, a relay's and a journal's: one
// name and one description, so that both are one stream.
const (
	RetentionDeleted            = "execstore.retention.deleted"
	RetentionDeletedDescription = "Finished executions or journal invocations deleted for their retention."
)

// Retained records that n finished executions in status were deleted for their retention.
func (t *Telemetry) Retained(status string, n int64) {
	if t == nil || t.retained == nil {
		return
	}
	t.retained.Add(context.Background(), n, metric.WithAttributes(append(append([]attribute.KeyValue{}, t.measured...),
		attribute.String("execstore.status", status))...))
}

// Handled records a handler call's end: delivered when err is nil, failed otherwise.
func (t *Telemetry) Handled(err error) {
	if t == nil || t.handled == nil {
		return
	}
	if err == nil {
		t.handled.Add(context.Background(), 1, metric.WithAttributes(t.measured...))
	} else {
		t.failed.Add(context.Background(), 1, metric.WithAttributes(t.measured...))
	}
}

// Dead records that an item was moved to dead.
func (t *Telemetry) Dead() {
	if t == nil || t.dead == nil {
		return
	}
	t.dead.Add(context.Background(), 1, metric.WithAttributes(t.measured...))
}

// Meter returns the meter, for a store's own instruments; nil for a nil Telemetry.
func (t *Telemetry) Meter() metric.Meter {
	if t == nil {
		return nil
	}
	return t.meter
}

// Span is one operation's span and clock. The zero Span (a nil Telemetry's) does nothing.
type Span struct {
	t     *Telemetry
	op    string
	span  trace.Span
	start time.Time
}

// Start starts the span of operation op concerning id, a child of ctx's, and returns the
// context that carries it.
func (t *Telemetry) Start(ctx context.Context, op, id string) (context.Context, Span) {
	if t == nil {
		return ctx, Span{}
	}
	attrs := make([]attribute.KeyValue, 0, len(t.base)+2)
	attrs = append(attrs, t.base...)
	attrs = append(attrs, attribute.String("db.operation.name", op), AttrID.String(id))
	if len(t.base) == 0 {
		attrs = attrs[:0]
		attrs = append(attrs, AttrID.String(id))
	}
	ctx, span := t.tracer.Start(ctx, "execstore."+t.store+"."+op,
		trace.WithSpanKind(t.kind), trace.WithAttributes(attrs...))
	return ctx, Span{t: t, op: op, span: span, start: time.Now()}
}

// Batched records a coalesced batch of size operations op, and marks the span each of ctxs
// carries with the batch's size.
func (t *Telemetry) Batched(op string, size int, ctxs ...context.Context) {
	if t == nil {
		return
	}
	for _, ctx := range ctxs {
		trace.SpanFromContext(ctx).SetAttributes(AttrBatchSize.Int(size))
	}
	t.batch.Record(context.Background(), int64(size),
		metric.WithAttributes(attribute.String("execstore.store", t.store), attribute.String("db.operation.name", op)))
}

// End ends the span with the operation's outcome, err, and records its duration.
func (s Span) End(err error) { s.EndAs(Outcome(err), err) }

// EndAs is End with the outcome named by the caller (a relay's "withheld").
func (s Span) EndAs(outcome string, err error) {
	if s.t == nil {
		return
	}
	s.span.SetAttributes(AttrOutcome.String(outcome))
	attrs := make([]attribute.KeyValue, 0, len(s.t.measured)+3)
	attrs = append(attrs, s.t.measured...)
	attrs = append(attrs, attribute.String("db.operation.name", s.op), AttrOutcome.String(outcome))
	if err != nil && outcome != "conflict" && outcome != "already_processed" {
		s.span.SetStatus(codes.Error, err.Error())
		s.span.SetAttributes(attribute.String("error.type", outcome))
		attrs = append(attrs, attribute.String("error.type", outcome))
	}
	s.span.End()
	ctx := context.Background()
	s.t.duration.Record(ctx, time.Since(s.start).Seconds(), metric.WithAttributes(attrs...))
	if outcome == "unknown" {
		s.t.unknown.Add(ctx, 1, metric.WithAttributes(attribute.String("execstore.store", s.t.store),
			attribute.String("db.operation.name", s.op)))
	}
}

// Outcome names how an operation that returned err ended.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, execstore.ErrOutcomeUnknown):
		return "unknown"
	case errors.Is(err, execstore.ErrConflict):
		return "conflict"
	case errors.Is(err, execstore.ErrAlreadyProcessed):
		return "already_processed"
	case errors.Is(err, execstore.ErrInvalid):
		return "invalid"
	case errors.Is(err, execstore.ErrOverloaded):
		return "overloaded"
	case errors.Is(err, execstore.ErrClosed):
		return "closed"
	case errors.Is(err, execstore.ErrNotFound):
		return "not_found"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "error"
}
