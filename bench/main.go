// Command bench measures the execution store against the design it replaces (the seed port),
// against the server's own ceiling (raw writes) and against no server at all (the store in
// memory), on one server in one run, and checks that every measured run was correct.
//
//	go run ./bench                 # every variant at concurrency 1, 8 and 64, embedded server
//	go run ./bench -uri mongodb://host:27017 -rtt 2ms -rounds 3
//	go run ./bench -rtt 0,2ms,10ms -concurrency 1,64   # every variant at each round trip
//	go run ./bench -scaling        # the timer sweep's cost by collection size
//	go run ./bench -soak 1000000 -timeout 2h -uri mongodb://host:27017   # a month of retention in one database
//	go run ./bench -variants memory -idem idem -journal none   # the idempotency-key store alone
//	go run ./bench -variants memory -idem none   # the operation journal alone
//	go run ./bench -variants aio -concurrency 1 -idem none -journal none -delivery 0   # the delivery section's chains
//	go run ./bench -h              # the flags
//
// Without -uri (or MONGODB_URI) it runs on the embedded server in this process. The report goes
// to stdout, progress to stderr. The report shows the snapshot cache's goals apart from the
// end-of-run checks: only the checks decide the last line, PASS or FAIL, and a failed check
// makes the exit status 1.
//
// bench/README.md explains the workload, the variants and what each measures, the columns,
// the end-of-run checks, the output files, the flags, and why figures on the embedded FerretDB
// server differ from MongoDB's.
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
	"runtime/trace"
	"strings"
	"syscall"
	"time"

	"golang.org/x/term"

	"github.com/execstore/execstore/internal/cpuhog"
)

// cleanupTimeout bounds closing clients, dropping databases and stopping the server, which
// run even after the run's own context has ended.
const cleanupTimeout = 30 * time.Second

// Variant names, in the order they run and are reported.
const (
	variantSeedPort = "seed-port"
	variantAIO      = "aio"
	variantBatch    = "aio+batch"
	variantCache    = "aio+cache"
	variantOtel     = "aio+otel"
	variantRaw      = "raw"
	variantMemory   = "memory"
)

var allVariants = []string{variantSeedPort, variantAIO, variantBatch, variantCache, variantOtel, variantRaw, variantMemory}

// usesServer reports whether a variant's runs talk to the server: all but memory do.
func usesServer(variant string) bool { return variant != variantMemory }

func main() {
	if cpuhog.Child() {
		if err := cpuhog.Spin(); err != nil { // started again by the delivery section, as a CPU hog
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	if os.Getenv(envRelayProcess) != "" {
		os.Exit(deliveryProcess()) // started again by the delivery section, as a relay process
	}
	cfg, err := parseFlags(os.Args[1:], os.Getenv("MONGODB_URI"), os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	os.Exit(run(cfg))
}

// record starts a recording of the whole run (a CPU profile, an execution trace) into a new
// file at path, and returns what stops it and closes the file; with path "" it records
// nothing.
func record(path string, start func(io.Writer) error, stop func()) (func(), error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		stop()
		f.Close()
	}, nil
}

// run performs the benchmark and returns the process exit status.
func run(cfg config) int {
	for _, r := range []struct {
		path  string
		start func(io.Writer) error
		stop  func()
	}{
		{cfg.cpuProfile, pprof.StartCPUProfile, pprof.StopCPUProfile},
		{cfg.trace, trace.Start, trace.Stop},
	} {
		stopRecording, err := record(r.path, r.start, r.stop)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer stopRecording()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	defer cancel()

	var status int
	var err error
	switch {
	case cfg.soakEvents > 0:
		status, err = soak(ctx, cfg)
	case cfg.viewsExecutions > 0:
		status, err = views(ctx, cfg)
	case cfg.indexGrowth > 0:
		status, err = indexGrowth(ctx, cfg)
	case cfg.scaling:
		status, err = scaling(ctx, cfg)
	default:
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

// bench runs every variant at every round trip and concurrency level, reports and charts. Everything it set
// up is torn down before it returns, whatever happened.
func bench(ctx context.Context, cfg config) (status int, err error) {
	t0 := time.Now()
	env, err := startEnvironment(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, env.close()) }()
	cfg.ackedMayReturn = ackedMayReturn(env.info.Family)

	stamp := time.Now().UTC().Format("20060102_150405")
	runs := len(cfg.rtts) * len(cfg.concurrency) * cfg.rounds * len(cfg.variants)
	prog := startProgress(os.Stderr, term.IsTerminal(int(os.Stderr.Fd())), runs, cfg.events)
	var results []runResult
	var runErr error
	atLowerRTT := map[int]float64{} // the fastest server variant's events/s at each concurrency, at the last rtt
levels:
	for _, rtt := range cfg.rtts {
		below := 0.0 // the fastest server variant's events/s at the level below, at this rtt
		for _, conc := range cfg.concurrency {
			cfg := cfg
			cfg.events = levelEvents(cfg, max(below, atLowerRTT[conc]))
			prog.setEvents(cfg.events)
			byVariant := make(map[string][]measured)
			for round := range cfg.rounds {
				for _, name := range cfg.variants {
					spec := runSpec{
						variant:     name,
						concurrency: conc,
						rtt:         rtt,
						database: fmt.Sprintf("bench_%s_%d_%s_t%d_c%d_r%d", stamp, os.Getpid(), databaseSafe(name),
							rtt.Milliseconds(), conc, round),
					}
					m, err := env.measureRun(ctx, cfg, spec, prog)
					if err != nil {
						runErr = fmt.Errorf("%s at concurrency %d, round trip +%s: %w", name, conc,
							rttLabel(float64(rtt.Milliseconds())), err)
						break levels
					}
					byVariant[name] = append(byVariant[name], m)
				}
			}
			below = 0
			for _, name := range cfg.variants {
				r := newRunResult(cfg, env.description, byVariant[name])
				if usesServer(name) {
					below = max(below, r.EventsPerS)
				}
				results = append(results, r)
			}
			atLowerRTT[conc] = below
		}
	}
	prog.stop()
	var idemRows []idemResult
	if runErr == nil && len(cfg.idemDesigns) > 0 {
		idemRows, runErr = env.runIdem(ctx, cfg, stamp)
	}
	var journalRows []journalResult
	if runErr == nil && len(cfg.journalDesigns) > 0 {
		journalRows, runErr = env.runJournal(ctx, cfg, stamp)
	}

	var delivery *deliveryReport
	if runErr == nil && (cfg.deliveryEntries > 0 || cfg.chains > 0) && env.admin != nil {
		delivery, runErr = env.runDelivery(ctx, cfg, stamp)
	}

	fillRatios(results)
	writeTable(os.Stdout, cfg, env.description, results, idemRows, journalRows, delivery)
	var outputsErr error
	if len(results) > 0 {
		files, ferr := writeOutputs(cfg, env.description, results, idemRows, journalRows, delivery)
		if ferr != nil {
			fmt.Fprintln(os.Stderr, "bench:", ferr)
			outputsErr = ferr
		}
		for _, f := range files {
			fmt.Fprintf(os.Stdout, "wrote %s\n", f)
		}
	}
	fmt.Fprintf(os.Stdout, "total time %.1f s\n", time.Since(t0).Seconds())
	status = writeVerdict(os.Stdout, append(checkedWorkloads(results, idemRows, journalRows), delivery.checked()...), runErr, outputsErr)
	return status, runErr
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

// levelEvents is the event budget of each run at one level (a round trip and a concurrency):
// -events when given, and with -quick=false the full size. Otherwise, the quick size at the
// first level, and at every other one as many events as the fastest server variant processed
// in levelSeconds (1.5 s) at the level below or at the same concurrency and the round trip
// before (rate, the larger), within [quickEvents, maxLevelEvents]: so that a run of a fast
// server at 64 handlers lasts long enough to measure, while a slow one (the embedded server,
// some 40–60 events/s at every level) keeps the quick size.
func levelEvents(cfg config, rate float64) int {
	if !cfg.sizeByServer || rate <= 0 {
		return cfg.events
	}
	return min(max(cfg.events, int(rate*levelSeconds)), maxLevelEvents)
}

// Bounds of levelEvents.
const (
	levelSeconds   = 1.5
	maxLevelEvents = 2000
)
