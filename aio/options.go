package aio

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/batch"
	"github.com/execstore/execstore/pool"
)

// Defaults of Options.
const (
	DefaultDatabase     = "execstore"
	DefaultTraceMax     = 200
	DefaultPingInterval = 100 * time.Millisecond
	// DefaultMaxBatch caps the operations of one batch on MongoDB.
	DefaultMaxBatch = 256
)

// Tuning for FerretDB, applied by withDefaults.
const (
	// ferretDBMaxBatch is the default batch cap on FerretDB, which never answers a bulk write
	// of 100 updates or more.
	ferretDBMaxBatch = 64
	// ferretDBBatchLimit is the largest batch used on FerretDB, whatever the option says.
	ferretDBBatchLimit = 99
	// ferretDBWritesInFlight is the default bound on write batches (group commits, acks) in
	// flight on FerretDB. Its front admits one write at a time, so a second batch in flight
	// would only wait there, and the commits it took would have made the next batch larger.
	ferretDBWritesInFlight = 1
)

// Options configures a Store. The zero value is ready to use; every field documents its
// default, and withDefaults is the one place they are worked out.
type Options struct {
	// Database holds the executions and counters collections. Default DefaultDatabase.
	Database string
	// Workers bounds the server operations in flight. Default pool.DefaultWorkers (32).
	Workers int
	// QueueDepth bounds the requests waiting for a worker. Default pool.DefaultQueueDepth (1024).
	QueueDepth int
	// Pool, when set, runs the store's operations on this pool, shared with the other stores
	// given it (one bound on the server operations in flight for the whole process); Workers
	// and QueueDepth are then the pool's, and Stats' Queued and InFlight count the whole pool.
	// Close waits for this store's operations and leaves the pool running: its owner closes
	// it after the stores. Default nil: a pool of the store's own.
	Pool *pool.Pool
	// ShedLoad makes every call fail at once with execstore.ErrOverloaded when QueueDepth
	// requests are already waiting, instead of waiting for room for as long as its context
	// allows (the default). Shed where a caller can answer "busy" (an API in front of the
	// engine); wait where the caller is a worker that should slow down.
	ShedLoad bool
	// TraceMax is how many trace steps an execution keeps (the oldest are dropped in the same
	// write that appends). Default DefaultTraceMax (200).
	TraceMax int
	// DedupeWindow bounds each execution's dedupe set: when positive, the set keeps the event
	// ids of at least the last DedupeWindow commits and of at most the last 2×DedupeWindow,
	// trimmed in the same atomic update that adds (on every server). An event redelivered
	// after falling out of the window is processed again. Default 0: every id is kept and the
	// set grows with every processed event. Every store on a database must use the same
	// window.
	DedupeWindow int
	// CacheSize turns on the snapshot cache and bounds it: the store keeps, for up to
	// CacheSize executions (least recently used dropped first), the snapshot as this process
	// last committed or read it (data, version, trace index) and the ids of the events it saw
	// processed on it. LoadForEvent of a cached execution then answers from memory, with no
	// server command, and the commit that follows is the event's one round trip: its dedupe
	// guard (in the same atomic update as the version guard) refuses an event processed
	// elsewhere with execstore.ErrAlreadyProcessed, and its version guard refuses a stale
	// snapshot with a *execstore.ConflictError, after which the entry is dropped and the
	// caller's reload reads the server. Memory: about CacheSize × (snapshot bytes + 200 +
	// the remembered event ids, at most 2×DedupeWindow of them, or cacheMaxEvents without a
	// window). Turn it on where each execution's events are handled by one process (routed by
	// execution id), the usual way to run an engine; leave it off where executions are handled
	// by many processes at random, since every miss costs one extra round trip (a stale entry
	// makes the commit fail and the reload follow). Default 0 (or less): off.
	CacheSize int
	// SeqBlockSize is how many outbox or spawn seqs one counter reservation takes.
	// Default batch.DefaultBlockSize (256).
	SeqBlockSize int64
	// Profile forces the server profile instead of detecting it at Open. Default
	// execstore.Detect.
	Profile execstore.Profile
	// ClientOptions are applied to the client Open creates, after the URI. The store adds a
	// command monitor of its own (chaining any monitor set here) to count server commands.
	// Ignored by OpenClient.
	ClientOptions *options.ClientOptions
	// DisableGroupCommit makes every commit its own server command. By default, commits of
	// existing executions that arrive while earlier ones are being written are coalesced into
	// one bulk write (a lone commit still goes out at once, alone); creates always go alone.
	DisableGroupCommit bool
	// DisableCoalescing makes every ack and load its own server command. By default, acks
	// that arrive while earlier ones are being written go out as one bulk write and, on
	// MongoDB, plain loads as one find by _id $in and LoadForEvent calls as one aggregation; a
	// lone call still goes out at once. (FerretDB's SQLite backend reads every document of the
	// collection for any filter but {_id} alone, so there each load is its own find by _id.)
	DisableCoalescing bool
	// MaxBatch caps the operations of one batch: the commits of a group commit's bulk write,
	// the acks of a coalesced bulk write, the loads of a coalesced find, and the timers of
	// one DeleteTimers bulk write. Default DefaultMaxBatch (256); on FerretDB 64, and never
	// more than 99 there (it never answers a bulk write of 100 updates or more).
	MaxBatch int
	// MaxBatchesInFlight bounds the batches of each kind in flight at once. Default
	// batch.DefaultMaxInFlight (4); on FerretDB 1 for the write batches (group commits and
	// acks), since its front admits one write at a time.
	MaxBatchesInFlight int
	// WriteConcern applies to every write. Default nil: the client's (the URI's), which is
	// the server's default when the URI sets none. On a replica set use
	// writeconcern.Majority() with journaling, so an acknowledged commit survives a failover.
	// An unacknowledged one (w: 0), from here, the URI or the client, is refused at Open.
	WriteConcern *writeconcern.WriteConcern
	// ReadConcern applies to every read but those that settle a write's outcome (they read
	// the primary at local read concern). Default nil: the client's. On a replica set,
	// readconcern.Majority() reads only what a failover cannot roll back.
	ReadConcern *readconcern.ReadConcern
	// PingInterval is the first pause between connection attempts at Open; pauses grow
	// exponentially up to 5s until Open's context ends. Default DefaultPingInterval.
	PingInterval time.Duration
}

// withDefaults returns o with every default filled in for a server of profile p; the
// defaults that depend on the server are left alone while p is Detect (before Open knows it).
func (o Options) withDefaults(p execstore.Profile) Options {
	if o.Database == "" {
		o.Database = DefaultDatabase
	}
	if o.Workers <= 0 {
		o.Workers = pool.DefaultWorkers
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = pool.DefaultQueueDepth
	}
	if o.TraceMax <= 0 {
		o.TraceMax = DefaultTraceMax
	}
	if o.SeqBlockSize <= 0 {
		o.SeqBlockSize = batch.DefaultBlockSize
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	switch p {
	case execstore.MongoDB:
		if o.MaxBatch <= 0 {
			o.MaxBatch = DefaultMaxBatch
		}
	case execstore.FerretDB:
		if o.MaxBatch <= 0 {
			o.MaxBatch = ferretDBMaxBatch
		}
		o.MaxBatch = min(o.MaxBatch, ferretDBBatchLimit)
	}
	return o
}

// writesInFlight is the bound on write batches in flight for a server of profile p; 0 means
// the coalescer's default.
func (o Options) writesInFlight(p execstore.Profile) int {
	if o.MaxBatchesInFlight <= 0 && p == execstore.FerretDB {
		return ferretDBWritesInFlight
	}
	return o.MaxBatchesInFlight
}
