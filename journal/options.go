package journal

import (
	"time"

	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/server"
)

// The defaults of Options, as its fields document them.
const (
	defaultCollection   = "journal"
	defaultWriteTimeout = 10 * time.Second
)

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
	return connect.NotNegativeDuration("Options.WriteTimeout", o.WriteTimeout)
}

func (o Options) withDefaults() Options {
	settle := o.SettleTimeout
	o.Connection = connect.Defaults(o.Connection, defaultCollection)
	o.SettleTimeout = settle // refused by check when set; never used
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = defaultWriteTimeout
	}
	return o
}
