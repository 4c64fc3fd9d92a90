package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/async"
	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/workers"
	"github.com/execstore/execstore/server"
)

// Store is the idempotency store. Every method is safe for concurrent use.
type Store struct {
	client     *mongo.Client
	ownsClient bool
	info       server.Info
	form       formulation
	recs       *records
	ferret     *ferretForm // nil on MongoDB
	pool       workers.Runner
	opts       Options // with every default worked out
	stats      *statCounters
	tel        *telemetry.Telemetry // nil: no-op providers
	stopReap   context.CancelFunc
	reaping    sync.WaitGroup
	// afterRenewWrite, when set, runs between RenewAll's write and its read: the tests use it
	// to change a record in between.
	afterRenewWrite func()
}

// Open connects to the server at uri and returns a store. It first refuses, before any I/O,
// a URI the driver cannot connect with ("uri") and a setting it cannot honour (see Options),
// with an *execstore.InvalidError naming the field. It pings the server, retrying with
// exponential backoff until ctx ends. When ctx has no deadline, Connection.ConnectTimeout
// (30s by default) bounds the whole of Open. The error then names the address and what
// answered (server.ErrConnectionRefused and the errors beside it). It asks the server what
// it is (Server reports it), and refuses a server older than MongoDB 4.4 with
// execstore.ErrInvalid. It creates the collection if it is missing. It picks the formulation
// by what the server does: MongoDB's, with its TTL index, where the server serves $$NOW in
// update pipelines (server.NowInWrites), and FerretDB's everywhere else. Options.Profile
// forces one. FerretDB's can be forced on any server, MongoDB's only on a server that serves
// it (else execstore.ErrInvalid). A probe that fails for any other reason fails Open.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	stats := newStatCounters()
	cfg := connect.Config{ClientOptions: opts.ClientOptions, Commands: &stats.Commands,
		PingInterval: opts.PingInterval, ConnectTimeout: opts.ConnectTimeout, WriteConcern: opts.WriteConcern,
		Profile: opts.Profile}
	return connect.Open(ctx, uri, cfg, func(ctx context.Context, client *mongo.Client, owns bool) (*Store, error) {
		return open(ctx, client, owns, opts, stats)
	})
}

// OpenClient returns a store over an existing client, which stays the caller's: Close does
// not disconnect it. Server commands are not counted in Stats for such a client. It refuses
// what Open refuses, and Options.ClientOptions (the client is made already). Its pings and
// probes are bounded as Open's are (Connection.ConnectTimeout).
func OpenClient(ctx context.Context, client *mongo.Client, opts Options) (*Store, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	if err := connect.CheckClientConnection(opts.Connection); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	cfg := connect.Config{PingInterval: opts.PingInterval, ConnectTimeout: opts.ConnectTimeout,
		WriteConcern: opts.WriteConcern, Profile: opts.Profile}
	return connect.OpenClient(ctx, client, cfg, func(ctx context.Context, client *mongo.Client, owns bool) (*Store, error) {
		return open(ctx, client, owns, opts, newStatCounters())
	})
}

func open(ctx context.Context, client *mongo.Client, owns bool, opts Options, stats *statCounters) (*Store, error) {
	info, err := connect.Identify(ctx, client, opts.Profile)
	if err != nil {
		return nil, connect.Refused(opts.Logger, "idem", err)
	}
	stats.Log(opts.Logger, "idem")
	db, err := connect.Database(ctx, client, opts.Database, opts.WriteConcern, opts.ReadConcern, !owns, opts.Collection)
	if err != nil {
		return nil, err
	}
	coll := db.Collection(opts.Collection)
	info.Profile, info.Probes, err = choose(ctx, coll, opts.Profile)
	if err != nil {
		return nil, connect.Refused(opts.Logger, "idem", err)
	}
	recs := newRecords(coll, opts.SettleTimeout, opts.Grace)
	s := &Store{client: client, ownsClient: owns, info: info, opts: opts, stats: stats, recs: &recs}
	switch info.Profile {
	case server.FerretDB:
		ask := helloClock(db)
		if info.Served(server.NowInReads) {
			ask = nowClock(db)
		}
		clock := &serverClock{ask: ask, now: opts.Clock, refresh: opts.ClockRefresh}
		if err := clock.sample(ctx); err != nil {
			return nil, err
		}
		s.ferret = &ferretForm{records: *s.recs, clock: clock}
		s.form = s.ferret
	default:
		s.form = &mongoForm{records: *s.recs}
	}
	if err := s.form.ensureIndexes(ctx); err != nil {
		return nil, err
	}
	s.pool = workers.RunnerFor(opts.Pool, workers.Config{Workers: opts.Workers, QueueDepth: opts.QueueDepth})
	s.tel = telemetry.New("idem", opts.Database, opts.Collection, opts.TracerProvider, opts.MeterProvider, s.pool)
	reapCtx, stop := context.WithCancel(context.Background())
	s.stopReap = stop
	if s.ferret != nil && opts.ReapInterval > 0 {
		s.reaping.Go(func() { s.reap(reapCtx) })
	}
	return s, nil
}

// Server returns what the store learned of the server at Open; its Profile names the
// formulation in use.
func (s *Store) Server() server.Info { return s.info }

// Close stops the sweep, stops accepting calls (execstore.ErrClosed), drains queued and
// in-flight operations within ctx and, for a store made by Open, disconnects the client. No
// goroutine of the store outlives it.
func (s *Store) Close(ctx context.Context) error {
	s.stopReap()
	s.reaping.Wait()
	err := s.pool.Close(ctx)
	if s.ownsClient {
		if derr := s.client.Disconnect(ctx); derr != nil && err == nil && !errors.Is(derr, mongo.ErrClientDisconnected) {
			err = derr
		}
	}
	return err
}

// minSweepTime is the least time a sweep is given, whatever ReapInterval.
const minSweepTime = 10 * time.Second

// reap sweeps expired records every ReapInterval until ctx ends (FerretDB only: MongoDB's
// TTL index reaps there). A sweep is bounded by ReapBatch records and by the interval, or
// minSweepTime when the interval is shorter: a sweep whose delete ran on the server but
// whose reply came after its deadline would delete records it never counts.
func (s *Store) reap(ctx context.Context) {
	t := time.NewTicker(s.opts.ReapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sweepCtx, cancel := context.WithTimeout(ctx, max(s.opts.ReapInterval, minSweepTime))
		n, err := s.ferret.sweep(sweepCtx, s.opts.ReapBatch)
		cancel()
		s.stats.reaped.Add(n)
		if err != nil && ctx.Err() == nil {
			s.stats.reapErrors.Add(1)
		}
	}
}

// submit runs fn as an operation of kind on key on the store's pool and waits for it, with
// the context rules of package async, in a span of its own.
func submit[T any](ctx context.Context, s *Store, kind opKind, key string, fn func(ctx context.Context) (T, error)) (T, error) {
	r := async.NewRequest(s.stats, int(kind), fn)
	if s.tel != nil {
		var span telemetry.Span
		ctx, span = s.tel.Start(ctx, opNames[kind], key)
		r.OnSettled(span.End)
	}
	return r.Submit(ctx, s.pool, s.opts.ShedLoad).Wait(ctx)
}

// choose probes coll's server for what idem's formulations rely on and returns the profile to
// use (forced, unless Detect) with what was probed: NowInWrites, unless FerretDB is forced,
// and for the FerretDB formulation NowInReads, which picks its clock. The collection is
// created first: DocumentDB refuses $$NOW in a findAndModify of a missing collection even
// where it serves it in writes.
func choose(ctx context.Context, coll *mongo.Collection, forced server.Profile) (server.Profile, []server.Probe, error) {
	var probes []server.Probe
	if forced != server.FerretDB {
		if err := ensureCollection(ctx, coll); err != nil {
			return "", nil, err
		}
		p, err := connect.ProbeNowInWrites(ctx, coll)
		if err != nil {
			return "", nil, err
		}
		if forced == server.MongoDB && !p.Served {
			return "", nil, contract.Invalid("Connection.Profile", "is %q, whose claims need %s, which this server refuses: %s; "+
				"leave it unset, and idem uses its FerretDB formulation here", string(forced), p.Feature, p.Refusal)
		}
		probes = append(probes, p)
	}
	profile := connect.Choose(forced, probes...)
	if profile == server.FerretDB {
		p, err := connect.ProbeNowInReads(ctx, coll.Database())
		if err != nil {
			return "", nil, err
		}
		probes = append(probes, p)
	}
	return profile, probes, nil
}

// codeNamespaceExists is the server's answer to creating a collection that exists.
const codeNamespaceExists = 48

// ensureCollection creates coll unless it exists.
func ensureCollection(ctx context.Context, coll *mongo.Collection) error {
	err := coll.Database().CreateCollection(ctx, coll.Name())
	var ce mongo.CommandError
	if err == nil || errors.As(err, &ce) && ce.Code == codeNamespaceExists {
		return nil
	}
	return fmt.Errorf("idem: creating collection %q: %w", coll.Name(), err)
}
