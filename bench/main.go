// Command bench measures the execution store against the design it replaces and against the
// server's own ceiling, on one server in one run, and checks that every measured run was
// correct.
//
// Usage:
//
//	go run ./bench [-uri URI] [-executions N] [-events N] [-concurrency 1,8,64]
//	               [-variants seed-port,aio,aio+batch,raw] [-rtt D] [-quick=false] [-out DIR]
//	               [-rounds N] [-seed N] [-redeliver F] [-timeout D] [-run-timeout D] [-keep]
//	go run ./bench -scaling [-uri URI] [-scaling-sizes 1000,100000] [-scaling-due 20]
//
// Without -uri (and without MONGODB_URI in the environment) it starts the embedded server
// (FerretDB on SQLite behind its write-serializing front, package embedded) in this process.
// With -rtt every client of the measured variants reaches the server through an in-process
// TCP proxy (toxiproxy) that delays each direction by half of D, so that round trips cost what
// they cost on a network.
//
// # The workload
//
// It is the runtime loop of a workflow engine. N executions are created, the first ones with
// one start event in their outbox. A relay goroutine reads the pending outbox, hands the
// entries of each scan to the handler goroutines that own their targets, then acks them while
// the handlers work: the seed port's relay one entry after the other, as the seed's
// synchronous design does; the async store's relay all of a scan's entries at once, as a user
// of an asynchronous store does (with coalescing on they go out as one bulk write). A handler
// loads
// the execution together with its dedupe verdict for the event, skips the event if it was
// already processed, and otherwise commits the changed snapshot with the event's dedupe mark,
// a timer operation, every tenth event a trace step, and one new event for another execution
// while the event budget lasts. A timer sweeper deletes due timers with the guarded delete.
// The relay withholds the ack of a seeded fraction of entries (-redeliver), as a relay that
// stops between delivering and acking would, so those events arrive twice and the handlers'
// dedupe must skip the second copy.
//
// # The variants
//
// For each -concurrency level (the number of handler goroutines) every variant runs in turn,
// -rounds times over, each run on a fresh database of the same server:
//
//   - seed-port: the design this store replaces, ported as it is specified, synchronously,
//     over the bare driver (seedport.go): outbox as an array, one counter findAndModify per
//     commit that emits and per traced step, a {_id, version} compare-and-set update, a load
//     and a separate dedupe read, whole-collection scans for the outbox and the timers, acks
//     by {"outbox.seq": seq} with $pull of the exact entry.
//   - aio: this module's asynchronous store with group commit and coalescing off
//     (DisableGroupCommit, DisableCoalescing): every call is its own command.
//   - aio+batch: the same store with its defaults: concurrent commits go out as one bulk
//     write, concurrent acks as another, concurrent loads as one find.
//   - raw: no store at all: per event the commit's update and the ack's update, as the store
//     would send them, over the bare driver at the same concurrency. It is the server's
//     ceiling for this work, and has no relay, no loads, no sweeps and no logic to check
//     beyond every update matching.
//
// # Reading the output
//
// Progress goes to stderr. stdout gets one table row per (variant, concurrency):
//
//   - events/s: events processed divided by the wall time from the first delivery until the
//     last event was processed and the outbox drained; creating the executions is not in it.
//     With -rounds above 1, the median of the rounds (each round's figure is in the JSON).
//   - p50 ms, p99 ms: latency of one event's handling as the handler sees it, by nearest
//     rank: from the start of its load to the end of its successful commit, conflict retries
//     included (duplicates skipped are not counted), over every round. For raw: its two
//     updates. At high concurrency it is mostly time queued for the server.
//   - cmds/event: server commands the variant's clients sent in that window (loads, dedupe
//     reads, commits, counter reservations, outbox scans and acks, timer sweeps, getMores),
//     counted by a driver command monitor on each client, divided by the events processed.
//     It does not depend on the server's speed: it is the figure that carries over to
//     another server. A second table breaks it down by command name.
//   - ×seed-port, ×raw: events/s divided by the seed-port's, or the raw run's, at the same
//     concurrency in this run.
//   - heap MiB: the Go heap in use after a collection, before the run's setup and at the end
//     of its window; with the embedded server it includes FerretDB's, not SQLite's.
//   - checks: "ok" when every end-of-run check passed. seed-port, aio and aio+batch are
//     checked against the final state: every event emitted once and processed once, every
//     redelivered copy skipped by dedupe and none skipped early, stored versions adding up to
//     the successful commits, snapshots counting the processed events, trace steps adding up
//     to the traced commits, an empty outbox, no acked entry coming back, no timer left after a
//     final sweep. raw is checked for every update having matched. A failed check is listed
//     under the table and makes the exit status 1.
//
// DIR/bench-results.json holds the same rows with more fields: each round's events/s, the
// commands by name, the variant's own counters (conflicts, duplicates, timers fired; for aio
// and aio+batch the store's calls by operation and its group commits), and call_ms, the p50
// and p99 of each kind of store call as the workload saw it (load_for_event, commit, ack,
// pending_outbox, due_timers, delete_timer). A store's updates beyond its commits, acks and
// timer deletes are its own housekeeping: for aio on MongoDB, the timer-hint repairs its sweep
// makes. And DIR/bench.png charts events/s against concurrency, one line per variant.
//
// The default run is sized (-quick) to finish within a minute on a 2-core machine with the
// embedded server; -quick=false runs larger ones. A single round's ratios move with whatever
// else the machine is doing; -rounds 3 steadies them.
//
// On the embedded server absolute figures say little about MongoDB: writes from every client
// go through one slot, and FerretDB's SQLite backend uses the primary key only for a filter
// made of _id alone, so every other filter (a compare-and-set, an ack, a dedupe read, a guarded
// timer delete) scans the collection and costs in proportion to its size. Keep -executions in
// the tens to low hundreds there, and compare designs by the ratios and by cmds/event.
//
// # Scaling
//
// -scaling measures instead the timer sweep at several collection sizes, with the same number
// of due timers each time: the store's sweep (a find on the timer_min hint, which an index
// serves on MongoDB) against the seed's (a whole-collection find of every document holding
// timers, fire times checked by the client). The executions are inserted in bulk, shaped as
// the store creates them, after the store has created its indexes. It reports the time per
// sweep (the median of up to -scaling-reps), the commands per sweep and, from explain, the
// documents and keys the server examined (MongoDB) or its SQLite plan (FerretDB, whose SQLite
// backend scans for both).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sizes of a run when none is given: quick ones, which keep the default run within a minute
// on a 2-core machine with the embedded server, and full ones (-quick=false).
const (
	quickExecutions = 64
	quickEvents     = 100
	fullExecutions  = 128
	fullEvents      = 1000
)

// cleanupTimeout bounds closing clients, dropping databases and stopping the server, which
// run even after the run's own context has ended.
const cleanupTimeout = 30 * time.Second

// Variant names, in the order they run and are reported.
const (
	variantSeedPort = "seed-port"
	variantAIO      = "aio"
	variantBatch    = "aio+batch"
	variantRaw      = "raw"
)

var allVariants = []string{variantSeedPort, variantAIO, variantBatch, variantRaw}

// config is what the flags select.
type config struct {
	cpuProfile  string // file for a CPU profile of the whole run; "" for none
	uri         string // "" for the embedded server
	executions  int
	events      int
	concurrency []int
	variants    []string
	rtt         time.Duration
	quick       bool
	out         string
	seed        uint64
	redeliver   float64
	timeout     time.Duration
	runTimeout  time.Duration
	keep        bool
	rounds      int

	scaling      bool
	scalingSizes []int
	scalingDue   int
	scalingReps  int
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
	var concurrency, variants, sizes string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.uri, "uri", os.Getenv("MONGODB_URI"),
		"MongoDB URI to run against (default $MONGODB_URI; empty: the embedded server, started in this process)")
	fs.IntVar(&cfg.executions, "executions", 0,
		fmt.Sprintf("executions each run creates (default %d, or %d with -quick=false)", quickExecutions, fullExecutions))
	fs.IntVar(&cfg.events, "events", 0,
		fmt.Sprintf("events each run processes, the start events included (default %d, or %d with -quick=false)", quickEvents, fullEvents))
	fs.StringVar(&concurrency, "concurrency", "1,8,64", "handler goroutines: a comma-separated list of levels, each measured")
	fs.StringVar(&variants, "variants", strings.Join(allVariants, ","), "variants to measure, comma-separated")
	fs.DurationVar(&cfg.rtt, "rtt", 0,
		"round-trip latency added between the clients and the server by an in-process proxy, in whole milliseconds (0: no proxy)")
	fs.BoolVar(&cfg.quick, "quick", true,
		"size the runs so that the default run finishes within a minute on 2 cores; -quick=false for larger runs")
	fs.StringVar(&cfg.out, "out", "bench-out", "directory for bench-results.json and bench.png (bench-scaling.json with -scaling)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of every random choice of the workload")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (the embedded server included) to this file")
	fs.Float64Var(&cfg.redeliver, "redeliver", 0.05,
		"fraction of outbox entries the relay delivers twice by withholding the first ack")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "bound on the whole benchmark")
	fs.DurationVar(&cfg.runTimeout, "run-timeout", 3*time.Minute, "bound on one run (one variant at one concurrency)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep each run's database instead of dropping it")
	fs.IntVar(&cfg.rounds, "rounds", 1,
		"rounds per concurrency level: each runs every variant in turn; events/s is the median of the rounds")
	fs.BoolVar(&cfg.scaling, "scaling", false, "measure the timer sweep at several collection sizes instead of the workload")
	fs.StringVar(&sizes, "scaling-sizes", "1000,100000", "collection sizes for -scaling, comma-separated")
	fs.IntVar(&cfg.scalingDue, "scaling-due", 20, "due timers in the collection for -scaling")
	fs.IntVar(&cfg.scalingReps, "scaling-reps", 5, "sweeps timed per size and design for -scaling (the median is reported)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	if cfg.concurrency, err = parseInts("-concurrency", concurrency); err != nil {
		return config{}, err
	}
	if cfg.scalingSizes, err = parseInts("-scaling-sizes", sizes); err != nil {
		return config{}, err
	}
	if cfg.variants, err = parseVariants(variants); err != nil {
		return config{}, err
	}
	if cfg.executions == 0 {
		cfg.executions = quickExecutions
		if !cfg.quick {
			cfg.executions = fullExecutions
		}
	}
	if cfg.events == 0 {
		cfg.events = quickEvents
		if !cfg.quick {
			cfg.events = fullEvents
		}
	}
	switch {
	case cfg.executions < 1:
		return config{}, fmt.Errorf("-executions must be at least 1, got %d", cfg.executions)
	case cfg.events < 1:
		return config{}, fmt.Errorf("-events must be at least 1, got %d", cfg.events)
	case cfg.rtt < 0 || cfg.rtt%time.Millisecond != 0:
		return config{}, fmt.Errorf("-rtt must be a non-negative whole number of milliseconds, got %v", cfg.rtt)
	case !(cfg.redeliver >= 0 && cfg.redeliver <= 1):
		return config{}, fmt.Errorf("-redeliver must be between 0 and 1, got %v", cfg.redeliver)
	case cfg.rounds < 1:
		return config{}, fmt.Errorf("-rounds must be at least 1, got %d", cfg.rounds)
	case cfg.timeout <= 0 || cfg.runTimeout <= 0:
		return config{}, fmt.Errorf("-timeout and -run-timeout must be positive")
	case cfg.scalingDue < 1:
		return config{}, fmt.Errorf("-scaling-due must be at least 1, got %d", cfg.scalingDue)
	case cfg.scalingReps < 1:
		return config{}, fmt.Errorf("-scaling-reps must be at least 1, got %d", cfg.scalingReps)
	}
	for _, n := range cfg.scalingSizes {
		if n < cfg.scalingDue {
			return config{}, fmt.Errorf("-scaling-sizes: %d is smaller than -scaling-due %d", n, cfg.scalingDue)
		}
	}
	return cfg, nil
}

// parseInts parses a comma-separated list of positive integers.
func parseInts(name, s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%s: %q is not a positive integer", name, f)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// parseVariants parses the -variants list and returns it in the order of allVariants.
func parseVariants(s string) ([]string, error) {
	var picked []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(allVariants, f) {
			return nil, fmt.Errorf("-variants: unknown variant %q (known: %s)", f, strings.Join(allVariants, ", "))
		}
		picked = append(picked, f)
	}
	var out []string
	for _, v := range allVariants {
		if slices.Contains(picked, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// run performs the benchmark and returns the process exit status.
func run(cfg config) int {
	if cfg.cpuProfile != "" {
		f, err := os.Create(cfg.cpuProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	var status int
	var err error
	if cfg.scaling {
		status, err = scaling(ctx, cfg)
	} else {
		status, err = bench(ctx, cfg)
	}
	if err != nil {
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			err = fmt.Errorf("%w (the benchmark is bounded by -timeout %v)", err, cfg.timeout)
		case ctx.Err() != nil:
			err = fmt.Errorf("interrupted: %w", err)
		}
		fmt.Fprintln(os.Stderr, "bench: FAIL:", err)
		return 1
	}
	return status
}

// bench runs every variant at every concurrency level, reports and charts. Everything it set
// up is torn down before it returns, whatever happened.
func bench(ctx context.Context, cfg config) (status int, err error) {
	t0 := time.Now()
	env, err := startEnvironment(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, env.close()) }()

	stamp := time.Now().UTC().Format("20060102_150405")
	runs := len(cfg.concurrency) * cfg.rounds * len(cfg.variants)
	prog := startProgress(os.Stderr, runs, cfg.events)
	var results []runResult
	var runErr error
levels:
	for _, conc := range cfg.concurrency {
		byVariant := make(map[string][]measured)
		for round := range cfg.rounds {
			for _, name := range cfg.variants {
				spec := runSpec{
					variant:     name,
					concurrency: conc,
					database:    fmt.Sprintf("bench_%s_%d_%s_c%d_r%d", stamp, os.Getpid(), databaseSafe(name), conc, round),
				}
				m, err := env.measureRun(ctx, cfg, spec, prog)
				if err != nil {
					runErr = fmt.Errorf("%s at concurrency %d: %w", name, conc, err)
					break levels
				}
				byVariant[name] = append(byVariant[name], m)
			}
		}
		for _, name := range cfg.variants {
			results = append(results, newRunResult(cfg, env.description, byVariant[name]))
		}
	}
	prog.stop()

	fillRatios(results)
	writeTable(os.Stdout, cfg, env.description, results)
	if len(results) > 0 {
		files, ferr := writeOutputs(cfg, env.description, results)
		if ferr != nil {
			fmt.Fprintln(os.Stderr, "bench:", ferr)
			status = 1
		}
		for _, f := range files {
			fmt.Fprintf(os.Stdout, "wrote %s\n", f)
		}
	}
	fmt.Fprintf(os.Stdout, "total time %.1f s\n", time.Since(t0).Seconds())
	if runErr != nil {
		return 1, runErr
	}
	for _, r := range results {
		if !r.ChecksPassed {
			status = 1
		}
	}
	return status, nil
}

// databaseSafe turns a variant name into part of a database name.
func databaseSafe(s string) string {
	return strings.NewReplacer("+", "_", "-", "_").Replace(s)
}

// cleanupContext returns a context for tearing down: it outlives ctx's cancellation but is
// bounded on its own.
func cleanupContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
}
