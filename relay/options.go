package relay

import (
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/leases"
)

// The defaults of Options, as its fields document them.
const (
	defaultPollInterval  = time.Second
	defaultWakeInterval  = 20 * time.Millisecond
	defaultLanes         = 64
	defaultBatch         = 256
	defaultLeaseDuration = 10 * time.Second
	defaultRetryMin      = 100 * time.Millisecond
	defaultRetryMax      = 30 * time.Second
	defaultStopTimeout   = 5 * time.Second
	defaultMaxAttempts   = 25
	// defaultRetentionInterval is Options.RetentionInterval by default.
	defaultRetentionInterval = time.Minute
	// defaultDeadCountInterval is Options.DeadCountInterval by default.
	defaultDeadCountInterval = time.Minute
	// defaultRatesInterval is Options.RatesInterval by default.
	defaultRatesInterval = 15 * time.Second
	// relayLeaseKey is a Relay's Options.LeaseKey by default.
	relayLeaseKey = leases.RelayKey
	// sweeperLeaseKey is a Sweeper's Options.LeaseKey by default.
	sweeperLeaseKey = leases.SweeperKey
)

// Options configures a Relay or a Sweeper. The zero value is ready to use. Every field
// documents its default.
type Options struct {
	// PollInterval is how often the partitions held are scanned. It bounds the latency of
	// entries committed by other processes, which their marks on the store's board usually
	// bring within WakeInterval. Commits through a store of this process are handed over at
	// once. A Sweeper's scans read twice this far ahead, and the timers not
	// due yet wait in memory for their fire time. Default 1s.
	PollInterval time.Duration
	// WakeInterval is how often a relay that holds partitions under a lease (Options.Lease,
	// or the sole lease) over a store with a board (aio's) reads the wake-ups the commits of
	// other processes left it there: one read of one document by its id. While its reads find
	// none it backs off to one every 4×WakeInterval, and comes back at the first it finds;
	// and after each read it waits at least four times as long as its reads take (their
	// median: a busy server), up to PollInterval. A
	// commit to an execution of a partition it holds is then delivered within about
	// WakeInterval, not a PollInterval later, and a timer armed in one fires on time. The
	// relay also publishes the partitions it holds there when they change, and every 10s.
	// Where the server pushes the changes of the relay's wake-ups (a change stream, on a
	// MongoDB replica set), the relay reads them when one comes (at most once per
	// WakeInterval), and otherwise once per PollInterval. Polls stay: a wake-up lost or late only delays. Default 20ms; negative:
	// none, the relay polls only.
	WakeInterval time.Duration
	// ScanGap is the least time between the starts of two scans that commits not handed
	// over or retries ask for. Under a stream of such commits, each scan then gathers what
	// the commits of one gap wrote, rather than one scan per commit. That takes fewer server
	// commands, for a delivery up to ScanGap later. A full scan is still followed by the
	// next at once. Acks are gathered the same way. A batch of acks (of timer deletes) is
	// sent no sooner than ScanGap after the last, unless Batch of them wait or the relay is
	// stopping. Default 0: a scan as soon as one is asked for (while at most Batch items are
	// in flight), and a batch of acks as soon as the last one is done.
	ScanGap time.Duration
	// Lanes bounds the handler calls in flight. Items are routed to lanes by execution: an
	// outbox entry by TargetID, or SourceID when it has none, and a timer by ExecutionID.
	// An execution's items queued or in a handler share a lane; one with none takes an idle
	// lane when there is one. Each lane delivers one item at a time. Default 64.
	Lanes int
	// Batch paces the scans. A scan is sent once at most Batch items are in flight (queued
	// in lanes or in handlers; those awaiting their ack count only beyond 2×Batch of them,
	// since a store may hold an ack a while; timers come due in memory, which wait for the
	// scan that confirms them, not at all). It asks for every item in flight plus Batch
	// more, and takes new ones until 2×Batch count (those come due in memory, again, not
	// at all). At most 4×Batch items are in flight at once, besides timers come due in
	// memory. Scanning thus overlaps delivery, and never piles it up. Default 256.
	Batch int
	// Lease, when set, makes the relays of many processes share the delivery through
	// leases in this lease store: an idem store (*idem.Store), or memstore.Leases in tests.
	// Each relay registers itself, and holds its share of the store's partitions, each under
	// a lease of its own. Default nil: the relay delivers every partition at once; over a
	// store that offers a lease store (aio's Store.LeaseStore) only while it holds the sole
	// lease there, so that of the relays without a lease of one database one delivers and
	// the others stand by (ErrStandingBy). Relays with a lease and relays without one do not
	// see each other (see the package doc).
	Lease Leases
	// Name is the readable part of the relay's name among its peers (Relay.Member), which the
	// lease records, Backlog, the board and the execstore CLI and UI show: the member is Name,
	// a dash and 16 random hex digits ("payments-1-3f2a9c0d5e7b8a61"), so that two relays
	// given one name (a copied configuration, a process restarted while its old leases live)
	// never pass for one. Default "": the host name and the process id. A Name of more than
	// MaxNameBytes bytes, not valid UTF-8, or holding a NUL or a "/" is refused: Run returns an
	// *Error matching execstore.ErrInvalid and naming Options.Name, before any call.
	Name string
	// LeaseKey is the prefix of the relays' keys in Lease. Use one per database the relays
	// serve, and another for sweepers. Default "execstore/relay/outbox" for a Relay,
	// "execstore/relay/timers" for a Sweeper. A LeaseKey whose keys would be in idem's
	// client namespace (LeaseKey+"/" starting with idem.ClientPrefix: "client", "client/…")
	// is refused when the relay leases (Lease is set, or the store offers a lease store):
	// Run returns an *Error matching execstore.ErrInvalid and naming Options.LeaseKey, and no
	// call reaches a lease store. There a request's Idempotency-Key could name the relays'
	// records; outside it none can (see idem.ClientPrefix).
	LeaseKey string
	// LeaseDuration is the length of each lease. The holder renews it every
	// LeaseDuration/3. It stops handing a partition's items out when less than
	// LeaseDuration/6 of its lease is left unrenewed. Every LeaseDuration/4 a relay looks
	// at the live relays and claims its share, so it takes a dead relay's partitions over at
	// most LeaseDuration×5/4 after that relay's last renewal (plus the lease server's clock
	// error). Default 10s.
	LeaseDuration time.Duration
	// RetryMin and RetryMax bound the exponential back-off after a failure of a handler, a
	// scan, an ack or a claim. A handler's back-off is per execution: its items wait, and the
	// others go on. Defaults 100ms and 30s.
	RetryMin, RetryMax time.Duration
	// StopTimeout bounds the acks of what the handlers finished, and then the lease's
	// release. It applies once the relay stops handing items out (Close, the end of Run's
	// context, a lost lease) and its handlers have returned. Close's context bounds them too.
	// Default 5s.
	StopTimeout time.Duration
	// MaxAttempts is how many failed deliveries an item gets before it is moved to dead,
	// when the store is an execstore.DeadLetters (aio and memstore are): each failure is
	// recorded with the item (its attempts, the error's text and the time: one
	// single-document write per failure), and the MaxAttempts-th moves the item from pending
	// to dead in that same write. Its execution's later items then go on. A handler error
	// wrapping ErrPermanent moves it at once. Over another store failed items are retried
	// for ever. Default 25.
	MaxAttempts int
	// OnDead, when set, is called after an item was moved to dead. It is called from the
	// relay's goroutines and must not block. Default nil: nothing is called (Stats.Dead and
	// the metric execstore.relay.dead count them).
	OnDead func(DeadEvent)
	// Clock is the Sweeper's clock. A timer is due when its fire time is at or before
	// Clock(). A Relay uses it only for the age its backlog gauge reports. Default time.Now.
	Clock func() time.Time
	// Logger receives the events an operator must see, each saying what happens next and
	// what to tune: a lease taken over from a holder whose lease had lapsed, or taken again
	// after the relay's own ran out (level info); a lease renewal that failed, a lease lost
	// (fenced, or run out unrenewed), a relay without a lease standing by (ErrStandingBy),
	// and an item moved to dead (level warn). Each names the
	// lease key and partition, or the item. Default nil: nothing is logged.
	Logger *slog.Logger
	// TracerProvider and MeterProvider receive a span per handler call
	// ("execstore.relay.deliver", "execstore.sweeper.fire", with the item and its outcome).
	// They also receive the metrics execstore.relay.handle.duration, execstore.relay.lag
	// (from the scan that found an item to its handler's start), execstore.relay.in_flight
	// and the backlog gauges (see Backlog). Default nil: the global ones as they are at New,
	// so install the SDK first. While none is installed, or given OpenTelemetry's no-op
	// providers, nothing is instrumented.
	TracerProvider trace.TracerProvider
	MeterProvider  metric.MeterProvider
	// OnPartition, when set, is called each time the relay takes a partition or gives one up
	// (see PartitionEvent). It is called from the relay's goroutines and must not block.
	// Default nil: nothing is called.
	OnPartition func(PartitionEvent)
	// CommitRemovesTimer is for a Sweeper whose handler's last act is a commit on the
	// timer's execution, made with the context it was given, through an aio store of this
	// process: that commit removes the timer in its own write, and the sweeper sends no
	// delete (Stats.Carried). If the handler fails after it, the timer is put back first
	// (see Sweeper). Set it only for such handlers: if the process dies between that commit
	// and the handler's return, the timer is not fired again, although its handler never
	// returned. Default false: a timer is deleted only once its handler returned nil (by
	// the next commit of its execution, or alone: see aio's DeleteTimers).
	CommitRemovesTimer bool
	// Retention, when set, makes the relay delete the finished executions of the partitions
	// it holds once past their retention (execstore.Retention: execstore.DefaultRetention
	// keeps Done and Cancelled ones 7 days and Failed ones 30), when the store is an
	// execstore.Retaining (aio and memstore are). Every RetentionInterval it reads up to
	// Batch of them (execstore.Retaining.ExpiredIn), deletes them (DeleteExpired: each only
	// as read, so one a commit moved on since is kept), and goes on while a read returns
	// Batch. Give it to one Relay or Sweeper of a database's processes: their leases share
	// the work out. The cutoffs are by Clock, the finish times by the committers' clocks:
	// a skew between them moves a deletion by as much. Default nil: nothing is deleted.
	Retention *execstore.Retention
	// RetentionInterval is how often the retention runs, the first time one PollInterval
	// after the relay starts. Default 1m.
	RetentionInterval time.Duration
	// DeadCountInterval is how often the relay counts the dead items of the partitions it
	// holds, for Backlog's Dead and the gauge execstore.backlog.dead, when the store is an
	// execstore.DeadCounting (aio and memstore are). Each count is one command
	// (CountDeadIn: on aio, one aggregation that reads only the documents holding dead
	// items), sent for all the partitions held at once, and again within a PollInterval
	// when the relay takes a partition. Between counts the relay adds the items it moves to
	// dead itself; a revive by another process shows at the next count. The scans cannot
	// tell instead: they read only pending work. Default 1m; negative: never counted, and
	// the gauge has no points.
	DeadCountInterval time.Duration
	// RatesInterval is how often the relay records what it did since the last record (its
	// handler calls that returned nil or an error, the items it moved to dead, the longest
	// wait its scans found) in the store's rate samples, when the store is an
	// execstore.RateRecording (aio is): what the UI's overview charts minute by minute. Each
	// record is one write to the current minute's sample of the relay's own (what it did
	// since the last falls in the minute it is recorded in); a relay that did nothing and
	// found nothing waiting writes none. Default 15s; negative: nothing recorded.
	RatesInterval time.Duration
	// OnError, when set, is called with every failure, as an *Error. A failure is of a scan,
	// a handler, an ack or a lease operation. It is called from the relay's goroutines and must not block.
	// Default nil: failures are only counted in Stats.
	OnError func(error)
}

func (o Options) withDefaults(leaseKey string) Options {
	if o.PollInterval <= 0 {
		o.PollInterval = defaultPollInterval
	}
	o.ScanGap = max(o.ScanGap, 0)
	if o.WakeInterval == 0 {
		o.WakeInterval = defaultWakeInterval
	}
	if o.Lanes <= 0 {
		o.Lanes = defaultLanes
	}
	if o.Batch <= 0 {
		o.Batch = defaultBatch
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if st, ok := o.Lease.(*idem.Store); ok && st == nil {
		o.Lease = nil // a nil *idem.Store is no lease store
	}
	if o.LeaseKey == "" {
		o.LeaseKey = leaseKey
	}
	if o.LeaseDuration <= 0 {
		o.LeaseDuration = defaultLeaseDuration
	}
	if o.RetryMin <= 0 {
		o.RetryMin = defaultRetryMin
	}
	if o.RetryMax <= 0 {
		o.RetryMax = defaultRetryMax
	}
	o.RetryMax = max(o.RetryMax, o.RetryMin)
	if o.StopTimeout <= 0 {
		o.StopTimeout = defaultStopTimeout
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.OnDead == nil {
		o.OnDead = func(DeadEvent) {}
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.RetentionInterval <= 0 {
		o.RetentionInterval = defaultRetentionInterval
	}
	if o.DeadCountInterval == 0 {
		o.DeadCountInterval = defaultDeadCountInterval
	}
	if o.RatesInterval == 0 {
		o.RatesInterval = defaultRatesInterval
	}
	if o.OnError == nil {
		o.OnError = func(error) {}
	}
	if o.OnPartition == nil {
		o.OnPartition = func(PartitionEvent) {}
	}
	return o
}

// checkLeaseKey refuses a lease key whose keys (the key, and the key, "/" and a suffix) may
// be keys idem's Do and Middleware store: those that start with idem.ClientPrefix. The key
// plus "/" starts with ClientPrefix exactly when one of its keys may: ClientPrefix ends in
// its only "/".
// MaxNameBytes bounds Options.Name: the member it makes, with its random part, stays within
// what a lease store keeps of a holder's name.
const MaxNameBytes = 128

// checkName checks Options.Name.
func checkName(name string) error {
	switch {
	case len(name) > MaxNameBytes:
		return contract.Invalid("Options.Name", "is %d bytes, more than the %d allowed", len(name), MaxNameBytes)
	case !utf8.ValidString(name):
		return contract.Invalid("Options.Name", "is not valid UTF-8")
	case strings.ContainsAny(name, "\x00/"):
		return contract.Invalid("Options.Name", "%q holds a NUL or a \"/\", which would make its lease keys ambiguous", name)
	}
	return nil
}

func checkLeaseKey(key string) error {
	if strings.HasPrefix(key+"/", idem.ClientPrefix) {
		return contract.Invalid("Options.LeaseKey", "%q is in idem's client namespace (idem.ClientPrefix %q), where a request's Idempotency-Key could name the relays' records: choose a key outside it", key, idem.ClientPrefix)
	}
	return nil
}

// PartitionEvent is a partition taken or given up by a relay or sweeper.
type PartitionEvent struct {
	// Partition is the partition's number. It is 0 when the store is not partitioned: one
	// lease covers it all.
	Partition int
	// Held is true when the relay took the partition, false when it gave it up: handed over
	// to a relay that joined, released as the relay stopped, or lost with its lease.
	Held bool
	// TakeOver reports a partition taken from another holder whose lease had lapsed.
	TakeOver bool
	// ReTake reports a partition taken again by the relay whose own lease of it had run
	// out (a renewal that came too late), not from another holder.
	ReTake bool
	// At is, for a partition taken, when the lease server started the lease, by its clock.
	// For a partition given up, it is when the relay stopped handing its items out, by this
	// process's clock. Without a lease it is the zero time when taken.
	At time.Time
	// Local is when the relay could start handing the partition's items out (the claim's
	// answer arrived), or stopped doing so, by this process's clock. A relay hands a
	// partition's items out only between the Local of its taking and of its giving up.
	Local time.Time
}
