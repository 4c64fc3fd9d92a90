package main

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/server"
)

// aioStore is the module's asynchronous store as the engine workload uses it: the aio
// variant, with group commit and the coalescing of acks and loads off, so that every call is
// its own command; the aio+batch variant, with the store's defaults (both on); and the
// aio+cache variant, the defaults with the snapshot cache on (Options.CacheSize), big enough
// for every execution of the run.
//
// Each run opens two stores on the run's database, each with its own client and command
// counter: the handlers' store, which creates the executions and serves the handlers' loads
// and commits, and the relay's store, which serves the relay's scans and acks, the timer
// sweeper and the end-of-run reads, as a relay and a sweeper running in processes of their
// own would. The handlers' client's commands are then exactly the events' critical path.
type aioStore struct {
	apiStore
	label     string
	uri       string
	database  string
	batch     bool
	cacheSize int
	cmds      *commandCounter // the handlers' store's client
	bgCmds    *commandCounter // the relay's store's client
	aio       *aio.Store      // the handlers' store, as apiStore's store, for its Stats
	bgAIO     *aio.Store      // the relay's store, as apiStore's bg
	// tp and mp, when set (aio+otel), are OpenTelemetry SDK providers given to both stores,
	// the relay and the sweeper: every span is recorded (and dropped at its end, no exporter
	// being installed) and every metric aggregated, so that the row shows the SDK's cost.
	tp *sdktrace.TracerProvider
	mp *sdkmetric.MeterProvider
}

// withSDK makes the store's runs use OpenTelemetry's SDK: the aio+otel variant.
func (s *aioStore) withSDK() {
	s.tp = sdktrace.NewTracerProvider()
	s.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
}

// telemetry returns the providers the relay and the sweeper are given: the SDK's for
// aio+otel, nil (the global ones, no SDK installed: nothing instrumented) for the others.
func (s *aioStore) telemetry() (trace.TracerProvider, metric.MeterProvider) {
	if s.tp == nil {
		return nil, nil
	}
	return s.tp, s.mp
}

func newAIOStore(label, uri, database string, batch bool, cacheSize int) *aioStore {
	return &aioStore{label: label, uri: uri, database: database, batch: batch, cacheSize: cacheSize,
		cmds: newCommandCounter(), bgCmds: newCommandCounter()}
}

func (s *aioStore) name() string { return s.label }

func (s *aioStore) open(ctx context.Context) error {
	opts := aio.Options{
		Connection:         server.Connection{Database: s.database, ClientOptions: options.Client().SetMonitor(s.cmds.monitor())},
		DisableGroupCommit: !s.batch,
		DisableCoalescing:  !s.batch,
		CacheSize:          s.cacheSize,
	}
	opts.TracerProvider, opts.MeterProvider = s.telemetry()
	st, err := aio.Open(ctx, s.uri, opts)
	if err != nil {
		return err
	}
	s.store, s.aio = st, st
	// The relay's store never loads an execution for an event: no cache.
	opts.ClientOptions = options.Client().SetMonitor(s.bgCmds.monitor())
	opts.CacheSize = 0
	bg, err := aio.Open(ctx, s.uri, opts)
	if err != nil {
		return err
	}
	s.bg, s.bgAIO = &relayAIO{Store: bg, handlers: st}, bg
	wake.Register(s.bg, wake.Of(bg))
	return nil
}

// relayAIO is the relay's store: its scans and reads are its own client's, and its acks and
// timer deletes go through the handlers' store, so that each rides in the next commit of its
// execution when one comes within aio's AckWait, as a relay and its engine in one process
// sharing their store would have it.
type relayAIO struct {
	*aio.Store
	handlers *aio.Store
}

func (r *relayAIO) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	return r.handlers.AckOutbox(ctx, sourceID, seq)
}

func (r *relayAIO) DeleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	return r.handlers.DeleteTimers(ctx, timers)
}

func (r *relayAIO) Close(ctx context.Context) error {
	wake.Unregister(r)
	return r.Store.Close(ctx)
}

// commands counts both stores' clients; pathCommands the handlers' loads and commits alone
// (aio.OperationOf): not the acks and timer deletes their store writes on the relay's behalf
// when no commit carries them.
func (s *aioStore) commands() commandCounts {
	return s.cmds.snapshot().plus(s.bgCmds.snapshot())
}

func (s *aioStore) pathCommands() commandCounts { return s.cmds.pathSnapshot() }

// counts reports the handlers' store's group commits (bulk writes issued, commits they
// carried), its seq-block reservations and, with the cache on, the cache's hits and misses,
// and both stores' calls by operation ("op_commit", "op_delete_timer", …).
func (s *aioStore) counts() map[string]int64 {
	if s.aio == nil {
		return nil
	}
	st := s.aio.Stats()
	ops := s.cmds.operations()
	c := map[string]int64{"group_commits": st.GroupCommits, "grouped_commits": st.GroupedCommits, "seq_blocks": st.SeqBlocks,
		"acks_carried": st.AcksCarried, "timers_carried": st.TimersCarried,
		// The commands the handlers' store wrote for the acks and timer deletes no commit
		// carried, on the relay's behalf.
		"ack_commands": ops["ack_outbox"], "timer_delete_commands": ops["delete_timer"]}
	if s.cacheSize > 0 {
		c["cache_hits"], c["cache_misses"] = st.CacheHits, st.CacheMisses
	}
	stats := []aio.Stats{st}
	if s.bgAIO != nil {
		bg := s.bgAIO.Stats()
		c["relay_store_coalesced_batches"] = bg.CoalescedBatches
		stats = append(stats, bg)
	}
	for _, st := range stats {
		for name, op := range st.Ops {
			if op.Calls > 0 {
				c["op_"+name] += op.Calls
			}
		}
	}
	return c
}

// close closes both stores, then the SDK's providers of aio+otel.
func (s *aioStore) close(ctx context.Context) error {
	err := s.apiStore.close(ctx)
	if s.tp != nil {
		err = errors.Join(err, s.tp.Shutdown(ctx), s.mp.Shutdown(ctx))
	}
	return err
}
