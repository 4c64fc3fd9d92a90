package idem

import (
	"time"

	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/idemcheck"
	"github.com/execstore/execstore/server"
)

// The defaults of Options, as its fields document them.
const (
	defaultCollection   = "idempotency"
	defaultLease        = 30 * time.Second
	defaultRetention    = 24 * time.Hour
	defaultGrace        = time.Minute
	defaultWaitTimeout  = 10 * time.Second
	defaultMaxBodyBytes = idemcheck.DefaultMaxBodyBytes
	defaultReapInterval = time.Minute
	defaultReapBatch    = 64
	defaultClockRefresh = time.Minute
)

// Options configures a Store. The zero value is ready to use. Every field documents its
// default. Open and OpenClient refuse, before any I/O, a negative count or duration (zero is
// the default). ReapInterval alone may be negative. They also refuse every setting of
// Connection that server.Connection says is refused.
type Options struct {
	// Connection is how the store reaches and loads its server. It holds the database, the
	// collection (default "idempotency"), client options, workers, queue depth, shared pool,
	// load shedding, profile, write and read concerns, and the settle timeout. The settle
	// timeout bounds the read that settles an unanswered claim or completion. See
	// server.Connection for each default.
	server.Connection

	// Lease is the lease Do and the middleware claim with. Do renews it every Lease/3.
	// Default 30s. A lease under 1ms is refused.
	Lease time.Duration
	// Retention is how long Do and the middleware keep a completed response for replay.
	// Default 24h. A retention under 1ms is refused.
	Retention time.Duration
	// Grace keeps a record past its lease or retention before it may be reaped, so that a
	// lapsed claim is reclaimed as LeaseReclaimed rather than vanishing. Default 1m.
	Grace time.Duration
	// FingerprintVersion is the version Do and the middleware store with their
	// fingerprints. Raise it when the fingerprint's algorithm changes. Default 1.
	FingerprintVersion int
	// WaitTimeout is how long Do waits for another caller's live claim to complete before
	// returning ErrInProgress. Default 10s.
	WaitTimeout time.Duration
	// MaxBodyBytes bounds a stored response body. A larger body is refused with ErrInvalid.
	// Default 1 MiB. It is at most MaxBodyLimit: Open refuses more.
	MaxBodyBytes int
	// ReapInterval is the pause between two sweeps of expired records with the FerretDB
	// formulation (the MongoDB one reaps with a TTL index). Each sweep deletes at most
	// ReapBatch records, and may take ReapInterval, or 10s when that is shorter, before it is
	// given up. Correctness never depends on it: expiry is enforced when a record is read.
	// Default 1m. A negative value disables the sweep.
	ReapInterval time.Duration
	// ReapBatch bounds the records one sweep deletes. Default 64.
	ReapBatch int
	// ClockRefresh is how old the reading of the server's clock may grow before the next
	// claim takes a new one. It applies to the FerretDB formulation only (see the package
	// doc). Default 1m.
	ClockRefresh time.Duration
	// Clock is the application's clock (FerretDB formulation only). Expiry follows the
	// server's clock. Time elapsed since the last reading of it is measured on Go's monotonic
	// clock, never on Clock, so an offset or a step of Clock of any size moves no lease. Clock
	// is watched. When it disagrees with the monotonic clock about the time elapsed since the
	// reading (it stepped), the next claim reads the server's clock again. Default time.Now.
	Clock func() time.Time
}

// check refuses, before any I/O and with an *execstore.InvalidError naming the field, a
// setting the store cannot honour: the Connection's (see server.Connection), a negative count
// or duration (zero is the default; ReapInterval alone may be negative), a lease or retention
// shorter than the 1ms a claim takes, a body bound past MaxBodyLimit.
func (o Options) check() error {
	if err := connect.CheckConnection(o.Connection, defaultCollection); err != nil {
		return err
	}
	for _, d := range []struct {
		field string
		value time.Duration
	}{
		{"Options.Lease", o.Lease},
		{"Options.Retention", o.Retention},
		{"Options.Grace", o.Grace},
		{"Options.WaitTimeout", o.WaitTimeout},
		{"Options.ClockRefresh", o.ClockRefresh},
	} {
		if err := connect.NotNegativeDuration(d.field, d.value); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		field string
		value time.Duration
	}{{"Options.Lease", o.Lease}, {"Options.Retention", o.Retention}} {
		if d.value != 0 && d.value < time.Millisecond {
			return contract.Invalid(d.field, "must be at least 1ms (0 means the default), got %v", d.value)
		}
	}
	for _, n := range []struct {
		field string
		value int
	}{
		{"Options.FingerprintVersion", o.FingerprintVersion},
		{"Options.MaxBodyBytes", o.MaxBodyBytes},
		{"Options.ReapBatch", o.ReapBatch},
	} {
		if err := connect.NotNegative(n.field, n.value); err != nil {
			return err
		}
	}
	if o.MaxBodyBytes > MaxBodyLimit {
		return contract.Invalid("Options.MaxBodyBytes", "is %d; a stored response must fit in one document: at most MaxBodyLimit (%d)", o.MaxBodyBytes, MaxBodyLimit)
	}
	return nil
}

func (o Options) withDefaults() Options {
	o.Connection = connect.Defaults(o.Connection, defaultCollection)
	if o.Lease <= 0 {
		o.Lease = defaultLease
	}
	if o.Retention <= 0 {
		o.Retention = defaultRetention
	}
	if o.Grace <= 0 {
		o.Grace = defaultGrace
	}
	if o.FingerprintVersion == 0 {
		o.FingerprintVersion = 1
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = defaultWaitTimeout
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = defaultMaxBodyBytes
	}
	if o.ReapInterval == 0 {
		o.ReapInterval = defaultReapInterval
	}
	if o.ReapBatch <= 0 {
		o.ReapBatch = defaultReapBatch
	}
	if o.ClockRefresh <= 0 {
		o.ClockRefresh = defaultClockRefresh
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return o
}
