// Command bench measures the execution store against the design it replaces (the seed port)
// and against the server's own ceiling (raw writes), on one server in one run, and checks that
// every measured run was correct.
//
//	go run ./bench                 # every variant at concurrency 1, 8 and 64, embedded server
//	go run ./bench -uri mongodb://host:27017 -rtt 2ms -rounds 3
//	go run ./bench -scaling        # the timer sweep's cost by collection size
//	go run ./bench -h              # the flags
//
// Without -uri (or MONGODB_URI) it runs on the embedded server in this process. The table goes
// to stdout, progress to stderr; a failed end-of-run check makes the exit status 1.
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
