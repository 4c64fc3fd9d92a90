package aio

import (
	"context"
	"errors"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/batch"
	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/internal/workers"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// Store is the asynchronous execution store. It implements execstore.Store. Every method is
// safe for concurrent use.
type Store struct {
	client     *mongo.Client
	ownsClient bool
	env        opsrun.Env
	info       server.Info
	pool       workers.Runner                // the store's own pool, or its share of Options.Pool
	group      *batch.Coalescer[*commitItem] // nil when group commit is off
	writes     *batch.Coalescer[*writeItem]  // nil when coalescing is off
	loads      *batch.Coalescer[*loadItem]   // nil when coalescing is off
	cache      *snapshotCache                // nil when Options.CacheSize is 0
	carrier    *ackCarrier                   // nil with Options.DisableAckCarrying
	opts       Options                       // with every default worked out
	shed       bool                          // Options.ShedLoad
	stop       context.Context               // ends when Close gives up waiting
	stopNow    context.CancelFunc
	closing    atomic.Bool // set when Close starts: no call is answered after it
	outboxSeq  *batch.Sequence
	spawnSeq   *batch.Sequence
	stats      *statCounters
	signal     *wake.Signal         // wakes the relays of the store's namespace; nil without a server
	board      *board               // wakes the relays of other processes; nil without a server
	wakeCalls  wakeCalls            // the reads that answer a wake-up, hedged
	tel        *telemetry.Telemetry // nil: instrumented with no-op providers, nothing to do
	leases     leaseStore           // LeaseStore's, opened on first use
	// ratesDropped is when RecordRates last dropped the old samples (unix nanoseconds).
	ratesDropped atomic.Int64
}

// storeEnv is what a store is built from: the client and what Open learned of its server,
// the options with every default worked out, and the bulk write of the group commit. open
// gives the server's; the group commit's tests give a stand-in writer and no server, and
// build the store the same way.
type storeEnv struct {
	client     *mongo.Client // nil in tests without a server
	ownsClient bool          // Close disconnects client
	info       server.Info
	env        opsrun.Env
	opts       Options // with every default worked out for info.Profile
	stats      *statCounters
	// writeBatch writes a group commit's batch and settles each plan: opsrun.CommitBatch.
	writeBatch batchWriter
}

// newStore builds a store from e. It sends nothing to the server: seq blocks are reserved when
// a commit first needs one, and the pool's workers and the coalescers wait for calls.
func newStore(e storeEnv) *Store {
	s := &Store{
		client:     e.client,
		ownsClient: e.ownsClient,
		info:       e.info,
		env:        e.env,
		stats:      e.stats,
		opts:       e.opts,
		shed:       e.opts.ShedLoad,
	}
	s.stats.Log(e.opts.Logger, "aio")
	s.stop, s.stopNow = context.WithCancel(context.Background())
	s.outboxSeq = batch.NewSequence(s.reserver(ops.OutboxCounter), e.opts.SeqBlockSize)
	s.spawnSeq = batch.NewSequence(s.reserver(ops.SpawnCounter), e.opts.SeqBlockSize)
	s.cache = newSnapshotCache(e.opts.CacheSize, e.opts.DedupeWindow)
	if !e.opts.DisableAckCarrying {
		s.carrier = newAckCarrier(s, e.opts.AckWait)
	}
	if !e.opts.DisableGroupCommit {
		s.group = newGroupCommit(s, e.writeBatch)
	}
	if !e.opts.DisableCoalescing {
		newCoalescers(s)
	}
	s.pool = workers.RunnerFor(e.opts.Pool, workers.Config{Workers: e.opts.Workers, QueueDepth: e.opts.QueueDepth})
	s.registerWake()
	s.tel = telemetry.New("aio", e.opts.Database, e.opts.Collection, e.opts.TracerProvider, e.opts.MeterProvider, s.pool)
	s.observeCache()
	return s
}

// reserver reserves the blocks of seqs of counter, counting each block reserved.
func (s *Store) reserver(counter string) batch.Reserver {
	return func(ctx context.Context, n int64) (int64, error) {
		last, err := opsrun.Reserve(ctx, s.env, counter, n)
		if err == nil {
			s.stats.seqBlocks.Add(1)
		}
		return last, err
	}
}

// Open connects to the server at uri and returns a store.
//
// It first refuses, before any I/O, a URI the driver cannot connect with and a setting it
// cannot honour (see Options). The error is an *execstore.InvalidError naming the field
// ("uri" for the URI).
//
// It then pings the server, retrying with exponential backoff, so a worker started beside
// its database waits for it instead of failing. It tries until ctx ends. When ctx has no
// deadline, it tries for Connection.ConnectTimeout (30s by default), which bounds the whole
// of Open. When it gives up, the error names the address, never the credentials, and what
// answered (server.ErrConnectionRefused and the errors beside it).
//
// It then asks the server what it is, with hello and buildInfo (see server.Info and
// server.Family). It refuses a server older than MongoDB 4.4, whatever Options.Profile says,
// with an error matching execstore.ErrInvalid.
//
// It picks the formulations by what the server does. It probes, with a find that matches no
// document, whether the server serves aggregation expressions in find projections
// (server.ExpressionProjections). It uses the MongoDB profile where it does, and the
// FerretDB one where it does not. A forced Options.Profile is used without a probe. A probe
// that fails for any other reason fails Open.
//
// It then reads the number of partitions the database records, or records it (see
// Options.Partitions). It refuses, before it writes anything else, an Options.Partitions that
// differs from the recorded number. It creates the indexes that are missing, and drops those
// of the scans without partitions, which an earlier version created. Last, it gives every
// document written without a partition its partition: one find of their ids and one bulk
// write per batch of them.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults(opts.Profile)
	stats := newStatCounters()
	cfg := connect.Config{ClientOptions: opts.ClientOptions, Commands: &stats.Commands,
		PingInterval: opts.PingInterval, ConnectTimeout: opts.ConnectTimeout, WriteConcern: opts.WriteConcern,
		Profile: opts.Profile}
	return connect.Open(ctx, uri, cfg, func(ctx context.Context, client *mongo.Client, owns bool) (*Store, error) {
		return open(ctx, client, owns, opts, stats)
	})
}

// OpenClient returns a store over an existing client, which stays the caller's: Close does not
// disconnect it. Server commands are not counted in Stats for such a client. Several stores
// may share one client, and one pool (Options.Pool). It refuses what Open refuses. It also
// refuses Options.ClientOptions, since the client is made already. Its pings and probes are
// bounded as Open's are (Connection.ConnectTimeout).
func OpenClient(ctx context.Context, client *mongo.Client, opts Options) (*Store, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := connect.CheckClientConnection(opts.Connection); err != nil {
		return nil, err
	}
	opts = opts.withDefaults(opts.Profile)
	cfg := connect.Config{PingInterval: opts.PingInterval, ConnectTimeout: opts.ConnectTimeout,
		WriteConcern: opts.WriteConcern, Profile: opts.Profile}
	return connect.OpenClient(ctx, client, cfg, func(ctx context.Context, client *mongo.Client, owns bool) (*Store, error) {
		return open(ctx, client, owns, opts, newStatCounters())
	})
}

func open(ctx context.Context, client *mongo.Client, owns bool, opts Options, stats *statCounters) (*Store, error) {
	info, err := connect.Identify(ctx, client, opts.Profile)
	if err != nil {
		return nil, connect.Refused(opts.Logger, "aio", err)
	}
	// A client the store did not make cannot say its write concern: the server is asked.
	db, err := connect.Database(ctx, client, opts.Database, opts.WriteConcern, opts.ReadConcern, !owns, ops.CountersCollection)
	if err != nil {
		return nil, err
	}
	executions := db.Collection(opts.Collection)
	if opts.Profile == server.Detect { // a forced profile needs no probe
		probe, err := connect.ProbeExpressionProjections(ctx, executions)
		if err != nil {
			return nil, err
		}
		info.Probes = []server.Probe{probe}
		info.Profile = connect.Choose(server.Detect, probe)
	}
	opts = opts.withDefaults(info.Profile)
	env := opsrun.Env{
		Layout:     ops.Layout{Profile: info.Profile, TraceMax: opts.TraceMax, DedupeWindow: opts.DedupeWindow},
		Executions: executions,
		Primary:    opsrun.PrimaryReads(executions),
		Durable:    opsrun.DurableReads(executions),
		Counters:   db.Collection(ops.CountersCollection),
		Rates:      db.Collection(ops.RatesCollectionOf(opts.Collection)),
	}
	// The partitions first: an Open that asks for another number than the recorded one
	// writes nothing.
	if env.Partitions, err = opsrun.RecordPartitions(ctx, env, "Options.Partitions", opts.Partitions); err != nil {
		return nil, err
	}
	if err := opsrun.EnsureIndexes(ctx, env); err != nil {
		return nil, err
	}
	if _, err := opsrun.AssignPartitions(ctx, env); err != nil {
		return nil, err
	}
	return newStore(storeEnv{client: client, ownsClient: owns, info: info, env: env, opts: opts, stats: stats,
		writeBatch: opsrun.CommitBatch}), nil
}

// Server returns what the store learned of the server at Open.
func (s *Store) Server() server.Info { return s.info }

// Close stops accepting calls and drains queued and in-flight work within ctx. It releases
// the seq prefetchers, closes the lease store LeaseStore opened and, for a store made by
// Open, disconnects the client. No goroutine of
// the store outlives it.
func (s *Store) Close(ctx context.Context) error {
	if s.carrier != nil {
		s.carrier.flush() // the acks waiting for a commit go out now, and Close waits for them
	}
	s.closing.Store(true)
	err := s.pool.Close(ctx)
	if err != nil {
		s.stopNow() // batches still queued are refused, those in flight cancelled
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		if s.group != nil {
			s.group.Close()
		}
		if s.writes != nil {
			s.writes.Close()
			s.loads.Close()
		}
		if s.board != nil {
			s.board.close() // after the commits, which note their marks
		}
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		s.stopNow()
		<-drained
		if err == nil {
			err = ctx.Err()
		}
	}
	s.stopNow()
	s.wakeCalls.wait() // hedged sends not taken: their contexts ended with their tasks or stop
	if s.board != nil {
		s.board.stopFollows() // the relays' change streams: ended by stop
	}
	wake.Unregister(s)
	wake.RegisterBoard(s, nil)
	s.outboxSeq.Close()
	s.spawnSeq.Close()
	if lerr := s.closeLeases(ctx); lerr != nil && err == nil {
		err = lerr
	}
	if s.ownsClient {
		if derr := s.client.Disconnect(ctx); derr != nil && err == nil && !errors.Is(derr, mongo.ErrClientDisconnected) {
			err = derr
		}
	}
	return err
}
