package idem

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/pool"
)

// Defaults of Options.
const (
	DefaultDatabase      = "execstore"
	DefaultCollection    = "idempotency"
	DefaultLease         = 30 * time.Second
	DefaultRetention     = 24 * time.Hour
	DefaultGrace         = time.Minute
	DefaultWaitTimeout   = 10 * time.Second
	DefaultMaxBodyBytes  = 1 << 20
	DefaultReapInterval  = time.Minute
	DefaultReapBatch     = 64
	DefaultClockRefresh  = time.Minute
	DefaultPingInterval  = 100 * time.Millisecond
	DefaultSettleTimeout = 5 * time.Second
)

// Options configures a Store. The zero value is ready to use; every field documents its
// default, and withDefaults is the one place they are worked out.
type Options struct {
	// Database holds the collection. Default DefaultDatabase.
	Database string
	// Collection holds one record per key. Default DefaultCollection.
	Collection string
	// Lease is the lease Do and the middleware claim with; Do renews it every Lease/3.
	// Default DefaultLease (30s).
	Lease time.Duration
	// Retention is how long Do and the middleware keep a completed response for replay.
	// Default DefaultRetention (24h).
	Retention time.Duration
	// Grace keeps a record past its lease or retention before it may be reaped, so that a
	// lapsed claim is reclaimed as LeaseReclaimed rather than vanishing. Default
	// DefaultGrace (1m).
	Grace time.Duration
	// FingerprintVersion is the version Do and the middleware store with their
	// fingerprints; raise it when the fingerprint's algorithm changes. Default 1.
	FingerprintVersion int
	// WaitTimeout is how long Do waits for another caller's live claim to complete before
	// returning ErrInProgress. Default DefaultWaitTimeout (10s).
	WaitTimeout time.Duration
	// MaxBodyBytes bounds a stored response body (ErrInvalid past it). Default
	// DefaultMaxBodyBytes (1 MiB); at most MaxBodyLimit.
	MaxBodyBytes int
	// ReapInterval is the pause between two sweeps of expired records on FerretDB (MongoDB
	// reaps with a TTL index); each sweep deletes at most ReapBatch records. Correctness
	// never depends on it: expiry is enforced when a record is read. Default
	// DefaultReapInterval (1m); negative disables the sweep.
	ReapInterval time.Duration
	// ReapBatch bounds the records one sweep deletes. Default DefaultReapBatch (64).
	ReapBatch int
	// ClockRefresh is how old the reading of the server's clock may grow before the next
	// claim takes a new one (FerretDB only; see the package doc). Default
	// DefaultClockRefresh (1m).
	ClockRefresh time.Duration
	// Clock is the application's clock (FerretDB formulation only). Expiry follows the
	// server's clock: time elapsed since the last reading of it is measured on Go's monotonic
	// clock, never on Clock, so an offset or a step of Clock of any size moves no lease. Clock
	// is watched: when it disagrees with the monotonic clock about the time elapsed since the
	// reading (it stepped), the next claim reads the server's clock again. Default time.Now.
	Clock func() time.Time
	// SettleTimeout bounds the read that settles an unanswered claim or complete. Default
	// DefaultSettleTimeout (5s).
	SettleTimeout time.Duration
	// Workers bounds the server operations in flight. Default pool.DefaultWorkers (32).
	Workers int
	// QueueDepth bounds the requests waiting for a worker. Default pool.DefaultQueueDepth.
	QueueDepth int
	// Pool, when set, runs the store's operations on this shared pool, as aio.Options.Pool.
	// Default nil: a pool of the store's own.
	Pool *pool.Pool
	// ShedLoad makes a call fail at once with execstore.ErrOverloaded when QueueDepth
	// requests already wait, instead of waiting for room. Default false.
	ShedLoad bool
	// Profile forces the server's formulation instead of detecting it at Open. Default
	// execstore.Detect.
	Profile execstore.Profile
	// ClientOptions are applied to the client Open creates, after the URI. Ignored by
	// OpenClient. Default nil.
	ClientOptions *options.ClientOptions
	// WriteConcern applies to every write. Default nil: the client's. An unacknowledged
	// one is refused at Open.
	WriteConcern *writeconcern.WriteConcern
	// PingInterval is the first pause between connection attempts at Open. Default
	// DefaultPingInterval.
	PingInterval time.Duration
}

func (o Options) withDefaults() Options {
	if o.Database == "" {
		o.Database = DefaultDatabase
	}
	if o.Collection == "" {
		o.Collection = DefaultCollection
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Grace <= 0 {
		o.Grace = DefaultGrace
	}
	if o.FingerprintVersion == 0 {
		o.FingerprintVersion = 1
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	o.MaxBodyBytes = min(o.MaxBodyBytes, MaxBodyLimit)
	if o.ReapInterval == 0 {
		o.ReapInterval = DefaultReapInterval
	}
	if o.ReapBatch <= 0 {
		o.ReapBatch = DefaultReapBatch
	}
	if o.ClockRefresh <= 0 {
		o.ClockRefresh = DefaultClockRefresh
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.SettleTimeout <= 0 {
		o.SettleTimeout = DefaultSettleTimeout
	}
	if o.Workers <= 0 {
		o.Workers = pool.DefaultWorkers
	}
	if o.QueueDepth <= 0 {
		o.QueueDepth = pool.DefaultQueueDepth
	}
	if o.PingInterval <= 0 {
		o.PingInterval = DefaultPingInterval
	}
	return o
}
