// Command bench drives an engine-like workload through the asynchronous execution store
// (package aio) and reports what it costs, then checks that the run was correct.
//
// Usage:
//
//	go run ./bench [-uri URI] [-executions N] [-events N] [-concurrency N] [-db NAME]
//	               [-seed N] [-redeliver F] [-timeout D]
//
// Without -uri (and without MONGODB_URI in the environment) it starts the embedded server
// (FerretDB on SQLite behind its write-serializing front, package embedded) in this process.
//
// The workload is the runtime loop of a workflow engine. N executions are created, each with
// one start event in its outbox. A relay goroutine reads the pending outbox, hands every entry
// to the handler goroutine that owns the target execution, and acks it. A handler loads the
// execution together with its dedupe verdict for the event (LoadForEvent), skips the event if
// it was already processed, and otherwise commits the changed snapshot with the event's dedupe
// mark, a timer operation, every tenth event a trace step, and one new event for another
// execution while the event budget lasts. A timer sweeper deletes due timers with the guarded
// delete. The relay withholds the ack of a seeded fraction of entries (-redeliver), as a relay
// that stops between delivering and acking would, so those events arrive twice and the
// handlers' dedupe must skip the second copy.
//
// How to read the report:
//
//   - throughput and wall time run from the first delivery to the moment the last event is
//     processed and the outbox is drained; creating the executions is timed apart ("seeding").
//   - commit and LoadForEvent latencies are per call as the caller sees them: queueing in the
//     store's request channel included, percentiles by nearest rank.
//   - server commands per event counts every command the store's client sent in that window
//     (loads, commits, outbox scans and acks, timer sweeps, seq-block reservations), divided
//     by the events processed. It does not depend on the server's speed, so it compares
//     designs and servers fairly; "store operations" breaks the calls down by kind.
//   - on the embedded server every write goes through one slot and FerretDB is the ceiling:
//     absolute figures say little about MongoDB, ratios within one run say more. FerretDB's
//     SQLite backend uses the primary key only for a filter made of _id alone; every other
//     filter the store sends (the version-guarded commit, the ack, the guarded timer delete,
//     the dedupe half of LoadForEvent) scans the collection up to the match, decoding each
//     document it passes, and the outbox and timer scans decode them all. Latency there grows
//     with -executions and with the documents' size, and the dedupe set grows with every
//     event, so throughput falls as a run goes on. The defaults finish in well under a minute
//     on a 2-core machine.
//   - heap in use is the process's live Go heap after a collection; with the embedded server
//     it includes FerretDB's, but not SQLite's, which allocates outside the Go heap.
//
// The run fails, with a non-zero exit status, if any end-of-run check fails: every emitted
// event processed exactly once, every redelivered copy skipped by dedupe and no event called
// processed before it was, stored versions, snapshots and trace indexes agreeing with the
// successful commits, an empty outbox, no acked outbox entry coming back, and no timer left
// after the final sweep. It also fails at once, naming the missing events, when the outbox is
// empty and no delivery is in flight before the budget is processed (events were lost), when
// a store call fails, and when -timeout ends the run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/ops"
)

// cleanupTimeout bounds closing the store, dropping the database and stopping the server,
// which run even after the run's own context has ended.
const cleanupTimeout = 30 * time.Second

// config is what the flags select.
type config struct {
	uri         string // "" for the embedded server
	executions  int
	events      int
	concurrency int
	db          string // "" for a fresh database, dropped at the end
	seed        uint64
	redeliver   float64
	timeout     time.Duration
}

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

func parseFlags(args []string, out io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.uri, "uri", os.Getenv("MONGODB_URI"),
		"MongoDB URI to run against (default $MONGODB_URI; empty: the embedded server, started in this process)")
	fs.IntVar(&cfg.executions, "executions", 100, "executions to create")
	fs.IntVar(&cfg.events, "events", 600, "events to process in total, the executions' start events included")
	fs.IntVar(&cfg.concurrency, "concurrency", 8, "handler goroutines")
	fs.StringVar(&cfg.db, "db", "",
		"database to use; it must hold no executions and is kept at the end (default: a fresh one, dropped at the end)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of every random choice of the workload")
	fs.Float64Var(&cfg.redeliver, "redeliver", 0.05,
		"fraction of outbox entries the relay delivers twice by withholding the first ack")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Minute, "bound on the whole run")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	switch {
	case cfg.executions < 1:
		return config{}, fmt.Errorf("-executions must be at least 1, got %d", cfg.executions)
	case cfg.events < 1:
		return config{}, fmt.Errorf("-events must be at least 1, got %d", cfg.events)
	case cfg.concurrency < 1:
		return config{}, fmt.Errorf("-concurrency must be at least 1, got %d", cfg.concurrency)
	case !(cfg.redeliver >= 0 && cfg.redeliver <= 1):
		return config{}, fmt.Errorf("-redeliver must be between 0 and 1, got %v", cfg.redeliver)
	case cfg.timeout <= 0:
		return config{}, fmt.Errorf("-timeout must be positive, got %v", cfg.timeout)
	}
	return cfg, nil
}

// run performs one benchmark run and returns the process exit status.
func run(cfg config) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	status, err := bench(ctx, cfg)
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("%w (the run is bounded by -timeout %v)", err, cfg.timeout)
		case ctx.Err() != nil:
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		return 1
	}
	return status
}

// bench sets up the server, the database and the store, runs the workload, reports and
// checks. Everything it set up is torn down before it returns, whatever happened.
func bench(ctx context.Context, cfg config) (status int, err error) {
	srv, err := startServer(ctx, cfg.uri)
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, srv.close()) }()

	dbName, dropAtEnd := cfg.db, false
	if dbName == "" {
		dbName, dropAtEnd = freshDatabaseName(), true
	}
	store, err := aio.Open(ctx, srv.uri, aio.Options{Database: dbName})
	if err != nil {
		return 1, err
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		err = errors.Join(err, store.Close(cctx))
		if dropAtEnd {
			err = errors.Join(err, dropDatabase(cctx, srv.uri, dbName))
		}
	}()

	if !dropAtEnd {
		page, err := store.List(ctx, execstore.ListQuery{Limit: 1})
		if err != nil {
			return 1, fmt.Errorf("inspecting database %q: %w", dbName, err)
		}
		if len(page.Items) > 0 {
			return 1, fmt.Errorf("database %q already holds executions; name an empty one, or omit -db for a fresh one", dbName)
		}
	}

	w := newWorkload(cfg, store)
	stopProgress := startProgress(os.Stderr, w)
	res, err := w.run(ctx)
	stopProgress()
	if err != nil {
		return 1, err
	}
	checks, err := w.check(ctx)
	if err != nil {
		return 1, err
	}

	info := runInfo{
		server:   srv.describe(store),
		profile:  store.Profile().String(),
		database: dbName,
		dropped:  dropAtEnd,
		embedded: srv.embedded != nil,
	}
	writeReport(os.Stdout, cfg, info, res)
	if !writeChecks(os.Stdout, checks) {
		return 1, nil
	}
	return 0, nil
}

// server is the server a run talks to: the embedded one, or the one a URI names.
type server struct {
	uri      string
	embedded *embedded.Server // nil for a URI
}

func startServer(ctx context.Context, uri string) (*server, error) {
	if uri != "" {
		return &server{uri: uri}, nil
	}
	fmt.Fprintln(os.Stderr, "bench: starting the embedded server")
	e, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		return nil, err
	}
	return &server{uri: e.URI(), embedded: e}, nil
}

func (s *server) close() error {
	if s.embedded == nil {
		return nil
	}
	return s.embedded.Close()
}

// describe names the server without credentials.
func (s *server) describe(store *aio.Store) string {
	info := store.Server()
	if s.embedded != nil {
		version := info.FerretDBVersion
		if v := linkedFerretDB(); v != "" {
			version = v
		}
		return fmt.Sprintf("embedded %s (in-process, SQLite, write-serializing front)", ferretDB(version))
	}
	hosts := "(unparsable URI)"
	if cs, err := connstring.Parse(s.uri); err == nil && len(cs.Hosts) > 0 {
		hosts = strings.Join(cs.Hosts, ",")
	}
	if info.Profile == ops.FerretDB {
		return fmt.Sprintf("%s (%s)", hosts, ferretDB(info.FerretDBVersion))
	}
	return fmt.Sprintf("%s (MongoDB %s)", hosts, info.Version)
}

// ferretDB names FerretDB with the version it reports, when it reports one.
func ferretDB(version string) string {
	if version == "" || version == "unknown" {
		return "FerretDB"
	}
	return "FerretDB " + version
}

// linkedFerretDB returns the version of the FerretDB module built into this binary, which
// the embedded server reports only as "unknown"; "" when it cannot be told.
func linkedFerretDB() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, m := range bi.Deps {
		if m.Path == "github.com/FerretDB/FerretDB" {
			return strings.TrimPrefix(m.Version, "v")
		}
	}
	return ""
}

// freshDatabaseName returns a database name no earlier run used.
func freshDatabaseName() string {
	return fmt.Sprintf("bench_%s_%d", time.Now().UTC().Format("20060102_150405"), os.Getpid())
}

// dropDatabase drops the run's database over a client of its own, so its commands are not
// counted as the store's.
func dropDatabase(ctx context.Context, uri, name string) error {
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return fmt.Errorf("dropping database %q: %w", name, err)
	}
	err = client.Database(name).Drop(ctx)
	if derr := client.Disconnect(ctx); err == nil {
		err = derr
	}
	if err != nil {
		return fmt.Errorf("dropping database %q: %w", name, err)
	}
	return nil
}

// cleanupContext returns a context for tearing down: it outlives ctx's cancellation but is
// bounded on its own.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}
