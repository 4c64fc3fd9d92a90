package journal

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/pool"
)

// Defaults of Options.
const (
	DefaultDatabase     = "execstore"
	DefaultCollection   = "journal"
	DefaultWriteTimeout = 10 * time.Second
	DefaultPingInterval = 100 * time.Millisecond
)

// Options configures a Journal. The zero value is ready to use against a replica set or a
// sharded cluster; every field documents its default, and withDefaults is the one place
// they are worked out.
type Options struct {
	// Database holds the collection. Default DefaultDatabase.
	Database string
	// Collection holds one document per invocation. Default DefaultCollection.
	Collection string
	// WriteTimeout bounds every write, from the moment its request is sent until the
	// majority has it: the MongoDB Go driver v2 cannot send a write concern's wtimeout, so
	// the bound is the operation's context deadline. A write past it has an unknown
	// outcome (and makes the Journal uncertain). Default DefaultWriteTimeout (10s).
	WriteTimeout time.Duration
	// AcceptWeakDurability lets Open accept a deployment where a write acknowledged with
	// w: "majority" and j: true may be on one node only: a standalone server (FerretDB
	// among them), or a replica set whose hello lists fewer than two voting data-bearing
	// members (a set of one member; one data-bearing member with arbiters; one with passive
	// or hidden members, whose votes hello cannot show). Default false: Open refuses such a
	// deployment with execstore.ErrInvalid.
	AcceptWeakDurability bool
	// ClientOptions are applied to the client Open creates, after the URI. Retryable
	// writes are always off on it: a URI or ClientOptions that asks for them is refused.
	// Write concern, read concern and read preference are the journal's own whatever these
	// say. Default nil.
	ClientOptions *options.ClientOptions
	// Workers bounds the server operations in flight. Default pool.DefaultWorkers (32).
	Workers int
	// QueueDepth bounds the requests waiting for a worker. Default pool.DefaultQueueDepth.
	QueueDepth int
	// Pool, when set, runs the journal's operations on this shared pool. Default nil: a
	// pool of the journal's own.
	Pool *pool.Pool
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
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
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
