package journal

import (
	"time"

	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/server"
)

// The defaults of Options, as its fields document them.
const (
	defaultCollection        = "journal"
	defaultWriteTimeout      = 10 * time.Second
	defaultRetentionInterval = time.Minute
	defaultRetentionBatch    = 100
)

// DefaultRetention is the retention this package suggests for Options.Retention: 30 days
// from the receipt that finished an invocation. It is not the default, which keeps every
// invocation: see Options.Retention.
const DefaultRetention = 30 * 24 * time.Hour

// MaxRetentionBatch bounds the invocations one DeleteExpired reads and deletes (its limit,
// and Options.RetentionBatch): each is a clause of the delete's filter.
const MaxRetentionBatch = 1000

// Options configures a Journal. The zero value is ready to use against a replica set or a
// sharded cluster. Every field documents its default.
type Options struct {
	// Connection is how the journal reaches and loads its server. It holds the database, the
	// collection (default "journal"), client options, workers, queue depth, shared pool, and
	// load shedding. See server.Connection for each default.
	//
	// The journal writes with w: "majority" and j: true, and reads at majority read concern
	// from the primary, whatever the client says. It never settles an unanswered write: it
	// fails closed (see Journal.Uncertain). It has one formulation for every server. So Open
	// refuses, with execstore.ErrInvalid, a Connection that sets WriteConcern, ReadConcern,
	// SettleTimeout or Profile. It also refuses a URI or ClientOptions that asks for
	// retryable writes: retryable writes are always off on the journal's client.
	server.Connection

	// WriteTimeout bounds every write, from the moment its request is sent until the
	// majority has it. The MongoDB Go driver v2 cannot send a write concern's wtimeout, so
	// the bound is the operation's context deadline. A write past it has an unknown outcome
	// and makes the Journal uncertain. Default 10s. A negative one is refused.
	WriteTimeout time.Duration
	// AcceptWeakDurability lets Open accept a deployment where a write acknowledged with
	// w: "majority" and j: true may be on one node only. Such a deployment is a standalone
	// server (FerretDB among them), or a replica set whose hello lists fewer than two voting
	// data-bearing members. That is a set of one member, one data-bearing member with
	// arbiters, or one with passive or hidden members, whose votes hello cannot show.
	// Default false: Open refuses such a deployment with execstore.ErrInvalid.
	AcceptWeakDurability bool

	// Retention, when above 0, makes the Journal delete its finished invocations (see
	// Invocation.Finished) once Retention has passed since the receipt that finished them.
	// It runs in a goroutine the Journal owns, one RetentionInterval after Open and then
	// every RetentionInterval, until Close: each run calls DeleteExpired with the cutoff
	// time.Now()-Retention and a limit of RetentionBatch, again while a call deletes that
	// many. A failed run is counted in Stats (Ops["delete_expired"]), logged to
	// Connection.Logger (level warn) and tried again at the next interval.
	//
	// Deleting an invocation forgets its id: a later Claim of the same id claims it anew,
	// and its operation can run again. So keep invocations longer than any caller may
	// retry an id. Default 0: the Journal deletes nothing, and every invocation is kept
	// for good. Off is the default because only the caller knows how long its ids may come
	// back; DefaultRetention (30 days) suits ids that are retried within minutes or days. A
	// negative one is refused.
	//
	// The cutoff is by this process's clock and the finish times are by the server's: a
	// clock ahead of the server's by s deletes s early. Several processes may run it on
	// one collection: each invocation is deleted once, and counted once.
	Retention time.Duration
	// RetentionInterval is how often the retention runs when Retention is set. Default 1m.
	// A negative one is refused.
	RetentionInterval time.Duration
	// RetentionBatch is the limit of each DeleteExpired the retention runs. Default 100, at
	// most MaxRetentionBatch. A negative one, or one above MaxRetentionBatch, is refused.
	RetentionBatch int

	// retained, when set (by tests), is told the outcome of every retention run.
	retained func(deleted int64, err error)
}

// check refuses, before any I/O and with an *execstore.InvalidError naming the field, the
// settings the journal cannot honour: those every store refuses (see server.Connection), a
// negative WriteTimeout (zero is the default), and the settings of Connection it has no use
// for.
func (o Options) check() error {
	const why = "the journal's own: it writes with w: \"majority\", j: true and reads at majority from the primary; leave it unset"
	switch {
	case o.WriteConcern != nil:
		return contract.Invalid("Connection.WriteConcern", "is "+why)
	case o.ReadConcern != nil:
		return contract.Invalid("Connection.ReadConcern", "is "+why)
	case o.SettleTimeout != 0:
		return contract.Invalid("Connection.SettleTimeout", "is not used: the journal never settles an unanswered write, it fails closed (see Journal.Uncertain); leave it unset")
	case o.Profile != server.Detect:
		return contract.Invalid("Connection.Profile", "is not used: the journal has one formulation for every server; leave it unset")
	}
	if err := connect.CheckConnection(o.Connection, defaultCollection); err != nil {
		return err
	}
	if err := connect.NotNegativeDuration("Options.WriteTimeout", o.WriteTimeout); err != nil {
		return err
	}
	if err := connect.NotNegativeDuration("Options.Retention", o.Retention); err != nil {
		return err
	}
	if err := connect.NotNegativeDuration("Options.RetentionInterval", o.RetentionInterval); err != nil {
		return err
	}
	if err := connect.NotNegative("Options.RetentionBatch", o.RetentionBatch); err != nil {
		return err
	}
	if o.RetentionBatch > MaxRetentionBatch {
		return contract.Invalid("Options.RetentionBatch", "is %d, more than MaxRetentionBatch (%d)", o.RetentionBatch, MaxRetentionBatch)
	}
	return nil
}

func (o Options) withDefaults() Options {
	settle := o.SettleTimeout
	o.Connection = connect.Defaults(o.Connection, defaultCollection)
	o.SettleTimeout = settle // refused by check when set; never used
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	if o.RetentionInterval <= 0 {
		o.RetentionInterval = defaultRetentionInterval
	}
	if o.RetentionBatch <= 0 {
		o.RetentionBatch = defaultRetentionBatch
	}
	return o
}
