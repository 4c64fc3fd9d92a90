package server

import (
	"log/slog"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/execstore/execstore/pool"
)

// Connection is how a store reaches and loads its server. It holds the settings every store
// of the module shares. aio.Options, idem.Options and journal.Options embed it. The zero
// value is ready to use. Each field says its default, which the module works out in one
// place for every store.
//
// A setting a store cannot honour is refused by its Open, before any I/O, never ignored.
// The error is an *execstore.InvalidError naming the field ("Connection.Workers"). Every
// store refuses a negative count or duration (zero is the default), a database or
// collection name MongoDB refuses, and Workers or QueueDepth beside a Pool. The journal
// writes and reads with its own concerns and never settles an outcome. So it refuses
// WriteConcern, ReadConcern and SettleTimeout. It also refuses retryable writes in the URI
// or ClientOptions.
type Connection struct {
	// Database holds the store's collections. Default "execstore".
	Database string
	// Collection is the store's collection. For aio it holds the executions (default
	// "executions"). The seq counters of aio stay in "counters", shared by every aio store of
	// the database, so that their seqs stay unique: aio refuses "counters" as the executions'
	// collection. For idem it holds the records (default
	// "idempotency"). For the journal it holds the invocations (default "journal").
	Collection string
	// ClientOptions are applied to the client Open creates, after the URI. The store adds a
	// command monitor of its own to count server commands. It chains any monitor set here.
	// OpenClient refuses ClientOptions: its client is the caller's. Default nil.
	ClientOptions *options.ClientOptions
	// Workers bounds the server operations in flight. Default 32.
	Workers int
	// QueueDepth bounds the requests waiting for a worker. Default 1024.
	QueueDepth int
	// Pool, when set, runs the store's operations on this pool, shared with the other stores
	// given it. That makes one bound on the server operations in flight for the whole
	// process. Workers and QueueDepth are then the pool's (pool.Config), and Open refuses
	// them set here. Stats' Queued and InFlight count the whole pool. Close waits for this
	// store's operations and leaves the pool running: its owner closes it after the stores.
	// Default nil: a pool of the store's own.
	Pool *pool.Pool
	// ShedLoad makes every call fail at once with execstore.ErrOverloaded when QueueDepth
	// requests are already waiting. By default a call waits for room for as long as its
	// context allows. Shed where a caller can answer "busy" (an API in front of the engine).
	// Wait where the caller is a worker that should slow down.
	ShedLoad bool
	// PingInterval is the first pause between connection attempts at Open. Pauses grow
	// exponentially up to 5s until Open gives up. Default 100ms.
	PingInterval time.Duration
	// ConnectTimeout bounds Open when its context has no deadline: its connection attempts,
	// what it asks the server and the probes it sends. A deadline of the caller's context
	// wins, shorter or longer. When time runs out, Open fails with an error naming the
	// address and what answered (see ErrConnectionRefused and the errors beside it).
	// Default 30s, the driver's server selection timeout.
	ConnectTimeout time.Duration
	// Profile forces the formulations instead of probing the server for them at Open (see
	// Profile). Default Detect.
	Profile Profile
	// WriteConcern applies to every write. Default nil: the client's (the URI's), which is
	// the server's default when the URI sets none. On a replica set use
	// writeconcern.Majority() with journaling, so that an acknowledged write survives a
	// failover. An unacknowledged write concern (w: 0) is refused at Open, whether it comes
	// from here, the URI or the client.
	WriteConcern *writeconcern.WriteConcern
	// ReadConcern applies to every read but those that settle a write's outcome. Those read
	// the primary at local read concern. Default nil: the client's. On a replica set,
	// readconcern.Majority() reads only what a failover cannot roll back.
	ReadConcern *readconcern.ReadConcern
	// SettleTimeout bounds the read that settles a write whose answer never came: a group
	// commit's or an ack's bulk write, an idem claim or completion. Past it, the outcome is
	// reported unknown. Default 5s.
	SettleTimeout time.Duration
	// Logger receives the few events an operator must see. One is a write whose outcome is
	// unknown (level warn, with the store, the operation and the cause). The other is a
	// server or deployment refused at Open (level error). Default nil: the store logs
	// nothing.
	Logger *slog.Logger
	// TracerProvider and MeterProvider receive the store's spans and metrics. There is one
	// span per operation. The metrics are OpenTelemetry's db.client.operation.duration and
	// the store's own (see docs/observability.md). Default nil: the global ones
	// (otel.GetTracerProvider, otel.GetMeterProvider) as they are at Open. So a program
	// installs its SDK before it opens its stores. While none is installed, or given
	// OpenTelemetry's no-op providers, the store instruments nothing at all. Its calls then
	// cost what they cost without telemetry.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
}
