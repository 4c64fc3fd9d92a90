package aio

import (
	"time"

	"github.com/execstore/execstore/batch"
	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// defaultMaxBatch caps the operations of one batch on MongoDB.
const defaultMaxBatch = 256

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

// The batches in flight (Options.MaxBatchesInFlight).
const (
	// defaultBatchesInFlight bounds the batches of each kind in flight at once, by default.
	defaultBatchesInFlight = 16
	// eagerBatchesInFlight of them go out with whatever waits. Sixteen eager batches, on
	// DocumentDB at 64 handlers, sent more than twice the commands per event of four, for
	// fewer events a second.
	eagerBatchesInFlight = 4
	// backlogOps operations waiting make a backlog, which the batches past
	// eagerBatchesInFlight go out for: each costs one command for 8 operations or more.
	backlogOps = 8
)

// Options configures a Store. The zero value is ready to use. Every field documents its
// default. Open and OpenClient refuse, before any I/O, a negative count (zero is the
// default). They also refuse every setting of Connection that server.Connection says is
// refused.
type Options struct {
	// Connection is how the store reaches and loads its server. It holds the database, the
	// collection (of the executions), client options, workers, queue depth, shared pool, load
	// shedding, profile, write and read concerns, and settle timeout. See server.Connection
	// for each default.
	server.Connection

	// TraceMax is how many trace steps an execution keeps. The oldest are dropped in the same
	// write that appends. Default 200.
	TraceMax int
	// DedupeWindow bounds each execution's dedupe set. When positive, the set keeps the event
	// ids of at least the last DedupeWindow commits and of at most the last 2×DedupeWindow.
	// It is trimmed in the same atomic update that adds, on every server. An event
	// redelivered after falling out of the window is processed again. Default 0: every id is
	// kept, and the set grows with every processed event. Every store on a database must use
	// the same window.
	DedupeWindow int
	// CacheSize turns on the snapshot cache and bounds it to CacheSize executions, least
	// recently used dropped first. For each, the store keeps the snapshot as this process
	// last committed or read it (data, version, trace index), and the ids of the events it
	// saw processed on it. LoadForEvent of a cached execution then answers from memory, with
	// no server command, and the commit that follows is the event's one round trip. That
	// commit's dedupe guard, in the same atomic update as its version guard, refuses an event
	// processed elsewhere with execstore.ErrAlreadyProcessed. Its version guard refuses a
	// stale snapshot with a *execstore.ConflictError, after which the entry is dropped and the
	// caller's reload reads the server. Memory: about CacheSize × (snapshot bytes + 200 + the
	// remembered event ids). An entry remembers at most 2×DedupeWindow ids, or 128 without a
	// window. Turn it on where each execution's events are handled by one process (routed by
	// execution id), the usual way to run an engine. Leave it off where executions are
	// handled by many processes at random: every miss costs one extra round trip, since a
	// stale entry makes the commit fail and the reload follow. Default 0: off.
	CacheSize int
	// SeqBlockSize is how many outbox or spawn seqs one counter reservation takes.
	// Default 256.
	SeqBlockSize int64
	// DisableGroupCommit makes every commit its own server command. By default, commits of
	// existing executions that arrive while earlier ones are being written are coalesced into
	// one bulk write. A lone commit still goes out at once, alone. Creates always go alone.
	DisableGroupCommit bool
	// DisableCoalescing makes every ack and load its own server command. By default, acks
	// that arrive while earlier ones are being written go out as one bulk write. On MongoDB,
	// loads are gathered the same way: plain loads into one find by _id $in, LoadForEvent
	// calls into one aggregation. A lone call still goes out at once. FerretDB's SQLite
	// backend reads every document of the collection for any filter but {_id} alone, so
	// there each load is its own find by _id.
	DisableCoalescing bool
	// AckWait is how long an AckOutbox waits for the next commit of the entry's source
	// execution through this store. That commit removes the entry in its own write, guarded
	// by the entry being there, and the ack sends no write of its own: the relay's ack of an
	// event rides in the commit its source makes for its next event. An ack no commit took
	// within AckWait, or taken by a commit that lost or whose outcome is unknown, is written
	// alone then, as it is at once with DisableAckCarrying. It returns once the entry is
	// removed either way, so the ack takes up to AckWait longer. An ack stops waiting, and is
	// written alone, once no commit was sent through the store for a tenth of AckWait while
	// none waited or was in flight in its group commit: the engine is idle, and no commit is
	// coming. A commit in flight keeps the acks waiting, since its caller commits again once
	// answered: under a slow server they add no writes of their own. The other acks and
	// timer deletes waiting for the same execution go with it, in one write. A store that
	// made no commit in the last second (one that serves only relays) writes its acks at
	// once. Default 300ms (idle after 30ms). The deletes of DeleteTimers wait the same way
	// for a commit of the timer's execution.
	AckWait time.Duration
	// DisableAckCarrying makes every AckOutbox, and every DeleteTimers, its own write, sent
	// at once.
	DisableAckCarrying bool
	// DisableRemoteWakes makes the store leave no marks for the relays of other processes
	// (package relay's board): they find its commits by polling, a relay.Options.PollInterval
	// later. Relays of this process are woken in memory either way. Default false: a store
	// that commits something to relay reads the relays' holdings at most once a second, and
	// writes the marks of the commits of one round trip in one bulk write, off the commits'
	// path.
	DisableRemoteWakes bool
	// MaxBatch caps the operations of one batch: the commits of a group commit's bulk write,
	// the acks of a coalesced bulk write, the loads of a coalesced find, and the timers of
	// one DeleteTimers bulk write. Default 256. On FerretDB the default is 64, and a batch
	// never holds more than 99 there: FerretDB never answers a bulk write of 100 updates or
	// more.
	MaxBatch int
	// MaxBatchesInFlight bounds the batches of each kind in flight at once. Default 16. Of
	// those, the first 4 (or MaxBatchesInFlight, if less) go out as soon as one operation
	// waits. The others go out only while 8 operations or more wait for a batch: a burst is
	// sent at once, in batches of 8 or more, rather than after a whole round trip, and a
	// steady flow still gathers into few batches. On FerretDB the default is 1 for the write
	// batches (group commits and acks), since its front admits one write at a time.
	MaxBatchesInFlight int
	// Partitions is the number of partitions the executions are divided into, so that
	// several relays can share the delivery (execstore.Partitioned). It is set once per
	// database and collection: the first Open records it, and every later Open uses what is
	// recorded. An Open that asks for another number fails with an error matching
	// execstore.ErrInvalid, and nothing is written. At most execstore.MaxPartitions. Default
	// 0: what the database records, else execstore.DefaultPartitions.
	Partitions int
}

// check refuses, before any I/O and with an *execstore.InvalidError naming the field, a
// setting the store cannot honour: the Connection's (see server.Connection), a negative count
// (zero is the default), a number of partitions past execstore.MaxPartitions, and the seq
// counters' collection as the executions'.
func (o Options) check() error {
	if err := connect.CheckConnection(o.Connection, ops.ExecutionsCollection); err != nil {
		return err
	}
	if o.Collection == ops.CountersCollection {
		return contract.Invalid("Connection.Collection", "%q holds the seq counters of every aio store of the database; name another", o.Collection)
	}
	for _, n := range []struct {
		field string
		value int
	}{
		{"Options.TraceMax", o.TraceMax},
		{"Options.DedupeWindow", o.DedupeWindow},
		{"Options.CacheSize", o.CacheSize},
		{"Options.MaxBatch", o.MaxBatch},
		{"Options.MaxBatchesInFlight", o.MaxBatchesInFlight},
	} {
		if err := connect.NotNegative(n.field, n.value); err != nil {
			return err
		}
	}
	if err := contract.ValidatePartitionCount("Options.Partitions", o.Partitions); err != nil {
		return err
	}
	if o.AckWait < 0 {
		return contract.Invalid("Options.AckWait", "must not be negative (0 is the default, %v; DisableAckCarrying sends every ack at once), got %v", defaultAckWait, o.AckWait)
	}
	return connect.NotNegative("Options.SeqBlockSize", o.SeqBlockSize)
}

// withDefaults returns o with every default filled in for a server of profile p; the
// defaults that depend on the server are left alone while p is Detect (before Open knows it).
func (o Options) withDefaults(p server.Profile) Options {
	o.Connection = connect.Defaults(o.Connection, ops.ExecutionsCollection)
	if o.TraceMax <= 0 {
		o.TraceMax = contract.DefaultTraceMax
	}
	if o.AckWait <= 0 {
		o.AckWait = defaultAckWait
	}
	switch p {
	case server.MongoDB:
		if o.MaxBatch <= 0 {
			o.MaxBatch = defaultMaxBatch
		}
	case server.FerretDB:
		if o.MaxBatch <= 0 {
			o.MaxBatch = ferretDBMaxBatch
		}
		o.MaxBatch = min(o.MaxBatch, ferretDBBatchLimit)
	}
	return o
}

// writesInFlight is the bound on write batches in flight for a server of profile p; 0 means
// the default (see batches).
func (o Options) writesInFlight(p server.Profile) int {
	if o.MaxBatchesInFlight <= 0 && p == server.FerretDB {
		return ferretDBWritesInFlight
	}
	return o.MaxBatchesInFlight
}

// batches bounds a kind of batch of which inFlight may be in flight at once (0: the
// default): MaxBatch operations each, the first eagerBatchesInFlight eager, the others for a
// backlog of backlogOps.
func (o Options) batches(inFlight int) batch.CoalescerConfig {
	if inFlight <= 0 {
		inFlight = defaultBatchesInFlight
	}
	return batch.CoalescerConfig{MaxItems: o.MaxBatch, MaxInFlight: inFlight,
		EagerInFlight: min(inFlight, eagerBatchesInFlight), BacklogItems: backlogOps}
}
