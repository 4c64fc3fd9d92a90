package main

import (
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execstore/execstore"
)

// Sizes of a run when none is given: quick ones, which keep the default run within 90 s on
// an idle 2-core machine with the embedded server (bench/README.md has the time measured),
// and full ones (-quick=false).
const (
	quickExecutions = 64
	quickEvents     = 100
	fullExecutions  = 128
	fullEvents      = 1000
	quickIdemKeys   = 100
	fullIdemKeys    = 2000

	quickJournalInvocations = 50
	fullJournalInvocations  = 1000

	// The memory variant's budget: it has no server, so a run as small as the others would
	// last a few milliseconds and measure its own start; this one measures a steady state.
	quickMemoryEvents = 20000
	fullMemoryEvents  = 100000
)

// config is what the flags select.
type config struct {
	cpuProfile string // file for a CPU profile of the whole run; "" for none
	trace      string // file for a runtime execution trace of the whole run; "" for none
	uri        string // "" for the embedded server
	// ackedMayReturn is set, from the detected server, where an acked outbox entry has been
	// measured to come back in a later scan (see ackedMayReturn); not a flag.
	ackedMayReturn bool
	executions     int
	events         int
	// sizeByServer: -events was not given and the runs are quick, so each level above a
	// round trip's first sizes its runs by the server's speed (see levelEvents).
	sizeByServer bool
	memoryEvents int // the memory variant's events per run
	concurrency  []int
	variants     []string
	rtts         []time.Duration // round trips added by the proxy, each measured; 0: no proxy
	quick        bool
	out          string
	seed         uint64
	redeliver    float64
	timeout      time.Duration
	runTimeout   time.Duration
	keep         bool
	rounds       int

	idemDesigns     []string // designs of the idempotency workload; none: not run
	idemKeys        int
	idemConcurrency []int

	journalDesigns     []string // designs of the journal workload; none: not run
	journalInvocations int
	journalConcurrency []int

	// deliveryEntries is the backlog of the delivery section, delivered by 1, 2 and 4 relay
	// processes; 0: the section is not run.
	deliveryEntries int
	deliverySet     bool // -delivery was given
	// deliveryWait is how long the relay processes' handler waits for each entry, as a
	// downstream call would.
	deliveryWait time.Duration
	// deliveryLoad are the numbers of relay processes whose delivery runs again while CPU
	// hogs keep every core busy (-load); loadTakeOver runs the take-over again too.
	deliveryLoad []int
	loadTakeOver bool
	// chains and chainHops are the delivery section's chain workload (-chain): chains pairs
	// of executions passing one event back and forth chainHops times, by 1, 2 and 4 relay
	// processes; chains 0: not run.
	chains, chainHops int

	scaling      bool
	scalingSizes []int
	scalingDue   int
	scalingReps  int

	// soakEvents is the soak's budget of events (-soak); 0: no soak, the workload runs.
	soakEvents      int
	soakLive        int     // executions kept live through the soak
	soakDays        float64 // simulated days the soak's events span
	soakCheckpoints int
	soakTimerOneIn  int // one step in this many waits for a timer; 0: none does
	// soakSlack is how long a finished execution may outlive the moment it became deletable
	// before a checkpoint counts it against the bound.
	soakSlack     time.Duration
	soakRetention execstore.Retention // the soak's relay's Options.Retention
	// soakReindex rebuilds the executions collection's indexes after each checkpoint's measures.
	soakReindex bool
	// viewsExecutions is the views run's number of executions (-views); 0: no views run.
	viewsExecutions int
	// indexGrowth is how many executions the index-growth run passes through (-index-growth);
	// 0: no index-growth run.
	indexGrowth int
}

// parseFlags parses the command line args into a config, checking every value before
// anything starts; defaultURI is -uri's default ($MONGODB_URI). Usage and errors of the flag
// package go to out.
func parseFlags(args []string, defaultURI string, out io.Writer) (config, error) {
	var cfg config
	var concurrency, variants, sizes, idemDesigns, idemConcurrency, journalDesigns, journalConcurrency, load, chain string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	// The default is applied after parsing, so that -h never prints a URI's credentials.
	fs.StringVar(&cfg.uri, "uri", "",
		"MongoDB URI to run against (default $MONGODB_URI; empty: the embedded server, started in this process)")
	fs.IntVar(&cfg.executions, "executions", 0,
		fmt.Sprintf("executions each run creates (default %d, or %d with -quick=false)", quickExecutions, fullExecutions))
	fs.IntVar(&cfg.events, "events", 0,
		fmt.Sprintf("events each run processes, the start events included (default %d, or %d with -quick=false)", quickEvents, fullEvents))
	fs.StringVar(&concurrency, "concurrency", "1,8,64", "handler goroutines: a comma-separated list of levels, each measured")
	fs.StringVar(&variants, "variants", strings.Join(allVariants, ","), "variants to measure, comma-separated")
	rtts := durationList{0}
	fs.Var(&rtts, "rtt",
		"round trips added between the clients and the server by an in-process proxy, in whole milliseconds (0: no proxy): "+
			"a comma-separated `list` (0,2ms,10ms), each measured; the idempotency and journal workloads run at the first")
	fs.IntVar(&cfg.memoryEvents, "memory-events", 0,
		fmt.Sprintf("events each run of the memory variant processes (default %d, or %d with -quick=false)", quickMemoryEvents, fullMemoryEvents))
	fs.BoolVar(&cfg.quick, "quick", true,
		"size the runs so that the default run finishes within 90 s on 2 idle cores; -quick=false for larger runs")
	fs.StringVar(&cfg.out, "out", "bench-out", "directory for bench-results.json and bench.png (bench-scaling.json with -scaling)")
	fs.Uint64Var(&cfg.seed, "seed", 1, "seed of every random choice of the workload")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (the embedded server included) to this file")
	fs.StringVar(&cfg.trace, "trace", "", "write a runtime execution trace of the whole run (go tool trace) to this file: where goroutines wait, and who wakes them")
	fs.Float64Var(&cfg.redeliver, "redeliver", 0.05,
		"fraction of outbox entries the relay delivers twice by withholding the first ack")
	fs.DurationVar(&cfg.timeout, "timeout", 10*time.Minute, "bound on the whole benchmark")
	fs.DurationVar(&cfg.runTimeout, "run-timeout", 3*time.Minute, "bound on one run (one variant at one round trip and concurrency)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep each run's database instead of dropping it")
	fs.IntVar(&cfg.rounds, "rounds", 1,
		"rounds per round trip and concurrency level: each runs every variant in turn; events/s is the median of the rounds")
	fs.StringVar(&idemDesigns, "idem", strings.Join(allIdemDesigns, ","),
		"designs of the idempotency-key workload, comma-separated (idem, idemkit); none to skip it")
	fs.IntVar(&cfg.idemKeys, "idem-keys", 0,
		fmt.Sprintf("keys each idempotency run claims, completes and replays (default %d, or %d with -quick=false)", quickIdemKeys, fullIdemKeys))
	fs.StringVar(&idemConcurrency, "idem-concurrency", "1,64", "callers of the idempotency workload: a comma-separated list of levels, each measured")
	fs.StringVar(&journalDesigns, "journal", strings.Join(allJournalDesigns, ","),
		"designs of the operation-journal workload, comma-separated (journal); none to skip it")
	fs.IntVar(&cfg.journalInvocations, "journal-invocations", 0,
		fmt.Sprintf("invocations each journal run takes through their whole life (default %d, or %d with -quick=false)",
			quickJournalInvocations, fullJournalInvocations))
	fs.StringVar(&journalConcurrency, "journal-concurrency", "1,64",
		"callers of the journal workload: a comma-separated list of levels, each measured")
	fs.IntVar(&cfg.deliveryEntries, "delivery", defaultDeliveryEntries,
		"outbox entries of the delivery section, delivered by 1, 2 and 4 relay processes (150 on the embedded server unless set); 0 to skip those rows")
	fs.DurationVar(&cfg.deliveryWait, "delivery-wait", deliveryWait,
		"how long the delivery section's handler waits for each entry, as a downstream call would (positive)")
	fs.StringVar(&load, "load", "none",
		"delivery runs repeated while CPU hogs keep every core busy: relay processes, comma-separated (1,2,4), all (those and the take-over), or none")
	fs.StringVar(&chain, "chain", defaultChain,
		"the delivery section's chain workload: `CHAINSxHOPS` (16x10: 16 pairs of executions passing an event back and forth 10 times, "+
			"by 1, 2 and 4 relay processes, timing each hop), or none")
	fs.BoolVar(&cfg.scaling, "scaling", false, "measure the timer sweep at several collection sizes instead of the workload")
	fs.StringVar(&sizes, "scaling-sizes", "1000,100000", "collection sizes for -scaling, comma-separated")
	fs.IntVar(&cfg.scalingDue, "scaling-due", 20, "due timers in the collection for -scaling")
	fs.IntVar(&cfg.scalingReps, "scaling-reps", 5, "sweeps timed per size and design for -scaling (the median is reported)")
	fs.IntVar(&cfg.soakEvents, "soak", 0,
		"drive this many events through one database over simulated days, checking that it stays bounded (0: no soak)")
	fs.IntVar(&cfg.viewsExecutions, "views", 0,
		"fill a database with this many executions and time every page of the web UI (and so every command's read), counting its server commands (0: no views run)")
	fs.IntVar(&cfg.indexGrowth, "index-growth", 0,
		"time the relay family's reads over 1,000 live executions, then again after this many more were created, finished and deleted, after a minute, and after a reIndex (0: no index-growth run)")
	fs.IntVar(&cfg.soakLive, "soak-live", 2000, "executions kept live (unfinished) through the soak")
	fs.Float64Var(&cfg.soakDays, "soak-days", 30, "simulated days the soak's events span")
	fs.IntVar(&cfg.soakCheckpoints, "soak-checkpoints", 20, "checkpoints of the soak, evenly spread over its events")
	fs.IntVar(&cfg.soakTimerOneIn, "soak-timer-one-in", 4, "one step of the soak's executions in this many waits for a timer rather than an emit (0: none does)")
	fs.DurationVar(&cfg.soakSlack, "soak-slack", 6*time.Second,
		"how long a finished execution may outlive the moment it became deletable (its retention past, its last ack and timer delete due) before the soak's bound counts it: "+
			"one RetentionInterval (1s), a retention pass's read and delete, the last ack's AckWait (300ms) and the sweeper's ScanGap (250ms)")
	fs.DurationVar(&cfg.soakRetention.Done, "soak-retain-done", 24*time.Hour, "retention of Done executions in the soak, simulated (0: kept)")
	fs.DurationVar(&cfg.soakRetention.Failed, "soak-retain-failed", 72*time.Hour, "retention of Failed executions in the soak, simulated (0: kept)")
	fs.BoolVar(&cfg.soakReindex, "soak-reindex", false,
		"after each checkpoint's measures, rebuild the executions collection's indexes (reIndex), which a server that keeps the keys of deleted documents in its indexes needs to keep its scans flat")
	fs.DurationVar(&cfg.soakRetention.Cancelled, "soak-retain-cancelled", 24*time.Hour,
		"retention of Cancelled executions in the soak, simulated (0: kept)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if !isSet(fs, "uri") {
		cfg.uri = defaultURI
	}
	cfg.deliverySet = isSet(fs, "delivery")
	var err error
	if cfg.concurrency, err = parseInts("-concurrency", concurrency); err != nil {
		return config{}, err
	}
	if cfg.deliveryLoad, cfg.loadTakeOver, err = parseLoad(load); err != nil {
		return config{}, err
	}
	if cfg.chains, cfg.chainHops, err = parseChain(chain); err != nil {
		return config{}, err
	}
	if cfg.scalingSizes, err = parseInts("-scaling-sizes", sizes); err != nil {
		return config{}, err
	}
	if cfg.variants, err = parseVariants(variants); err != nil {
		return config{}, err
	}
	if cfg.idemDesigns, err = parseIdemDesigns(idemDesigns); err != nil {
		return config{}, err
	}
	if cfg.idemConcurrency, err = parseInts("-idem-concurrency", idemConcurrency); err != nil {
		return config{}, err
	}
	if cfg.journalDesigns, err = parseJournalDesigns(journalDesigns); err != nil {
		return config{}, err
	}
	if cfg.journalConcurrency, err = parseInts("-journal-concurrency", journalConcurrency); err != nil {
		return config{}, err
	}
	if cfg.journalInvocations == 0 {
		cfg.journalInvocations = quickJournalInvocations
		if !cfg.quick {
			cfg.journalInvocations = fullJournalInvocations
		}
	}
	if cfg.idemKeys == 0 {
		cfg.idemKeys = quickIdemKeys
		if !cfg.quick {
			cfg.idemKeys = fullIdemKeys
		}
	}
	if cfg.executions == 0 {
		cfg.executions = quickExecutions
		if !cfg.quick {
			cfg.executions = fullExecutions
		}
	}
	if cfg.events == 0 {
		cfg.events = quickEvents
		cfg.sizeByServer = cfg.quick
		if !cfg.quick {
			cfg.events = fullEvents
		}
	}
	if cfg.memoryEvents == 0 {
		cfg.memoryEvents = quickMemoryEvents
		if !cfg.quick {
			cfg.memoryEvents = fullMemoryEvents
		}
	}
	switch {
	case cfg.memoryEvents < 1:
		return config{}, fmt.Errorf("-memory-events must be at least 1, got %d", cfg.memoryEvents)
	case cfg.executions < 1:
		return config{}, fmt.Errorf("-executions must be at least 1, got %d", cfg.executions)
	case cfg.events < 1:
		return config{}, fmt.Errorf("-events must be at least 1, got %d", cfg.events)
	case !(cfg.redeliver >= 0 && cfg.redeliver <= 1):
		return config{}, fmt.Errorf("-redeliver must be between 0 and 1, got %v", cfg.redeliver)
	case cfg.idemKeys < 1:
		return config{}, fmt.Errorf("-idem-keys must be at least 1, got %d", cfg.idemKeys)
	case cfg.journalInvocations < 1:
		return config{}, fmt.Errorf("-journal-invocations must be at least 1, got %d", cfg.journalInvocations)
	case cfg.deliveryEntries < 0:
		return config{}, fmt.Errorf("-delivery must not be negative, got %d", cfg.deliveryEntries)
	case cfg.deliveryWait <= 0:
		return config{}, fmt.Errorf("-delivery-wait must be positive, got %v", cfg.deliveryWait)
	case cfg.rounds < 1:
		return config{}, fmt.Errorf("-rounds must be at least 1, got %d", cfg.rounds)
	case cfg.timeout <= 0 || cfg.runTimeout <= 0:
		return config{}, fmt.Errorf("-timeout and -run-timeout must be positive")
	case cfg.scalingDue < 1:
		return config{}, fmt.Errorf("-scaling-due must be at least 1, got %d", cfg.scalingDue)
	case cfg.scalingReps < 1:
		return config{}, fmt.Errorf("-scaling-reps must be at least 1, got %d", cfg.scalingReps)
	case cfg.indexGrowth < 0:
		return config{}, fmt.Errorf("-index-growth must not be negative, got %d", cfg.indexGrowth)
	case cfg.viewsExecutions < 0:
		return config{}, fmt.Errorf("-views must not be negative, got %d", cfg.viewsExecutions)
	case cfg.soakEvents < 0:
		return config{}, fmt.Errorf("-soak must not be negative, got %d", cfg.soakEvents)
	case cfg.soakLive < 1:
		return config{}, fmt.Errorf("-soak-live must be at least 1, got %d", cfg.soakLive)
	case !(cfg.soakDays > 0):
		return config{}, fmt.Errorf("-soak-days must be positive, got %v", cfg.soakDays)
	case cfg.soakTimerOneIn < 0:
		return config{}, fmt.Errorf("-soak-timer-one-in must not be negative, got %d", cfg.soakTimerOneIn)
	case cfg.soakSlack < 0:
		return config{}, fmt.Errorf("-soak-slack must not be negative, got %v", cfg.soakSlack)
	case cfg.soakCheckpoints < 1:
		return config{}, fmt.Errorf("-soak-checkpoints must be at least 1, got %d", cfg.soakCheckpoints)
	case cfg.soakRetention.Done < 0 || cfg.soakRetention.Failed < 0 || cfg.soakRetention.Cancelled < 0:
		return config{}, fmt.Errorf("-soak-retain-done, -soak-retain-failed and -soak-retain-cancelled must not be negative")
	}
	for _, d := range rtts {
		if d < 0 || d%time.Millisecond != 0 {
			return config{}, fmt.Errorf("-rtt must be a non-negative whole number of milliseconds, got %v", d)
		}
		if !slices.Contains(cfg.rtts, d) {
			cfg.rtts = append(cfg.rtts, d)
		}
	}
	for _, n := range cfg.scalingSizes {
		if n < cfg.scalingDue {
			return config{}, fmt.Errorf("-scaling-sizes: %d is smaller than -scaling-due %d", n, cfg.scalingDue)
		}
	}
	return cfg, nil
}

// durationList is a flag of comma-separated durations, in the order given.
type durationList []time.Duration

func (l *durationList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, d := range *l {
		s[i] = d.String()
	}
	return strings.Join(s, ",")
}

func (l *durationList) Set(s string) error {
	var out durationList
	for f := range strings.SplitSeq(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil {
			return err
		}
		out = append(out, d)
	}
	*l = out
	return nil
}

// isSet reports whether the command line set the flag name.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
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
	return parseChoices("-variants", "variant", s, allVariants)
}

// parseChoices parses a comma-separated list of names of flag, each one of known, and
// returns the names picked in the order of known.
func parseChoices(flag, what, s string, known []string) ([]string, error) {
	var picked []string
	for f := range strings.SplitSeq(s, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("%s: unknown %s %q (known: %s)", flag, what, f, strings.Join(known, ", "))
		}
		picked = append(picked, f)
	}
	var out []string
	for _, v := range known {
		if slices.Contains(picked, v) {
			out = append(out, v)
		}
	}
	return out, nil
}

// parseIdemDesigns parses the -idem list and returns it in the order of allIdemDesigns; "none"
// (or nothing) selects none.
func parseIdemDesigns(s string) ([]string, error) {
	if t := strings.TrimSpace(s); t == "" || t == "none" {
		return nil, nil
	}
	return parseChoices("-idem", "design", s, allIdemDesigns)
}

// parseJournalDesigns parses the -journal list; "none" (or nothing) selects none.
func parseJournalDesigns(s string) ([]string, error) {
	if t := strings.TrimSpace(s); t == "" || t == "none" {
		return nil, nil
	}
	return parseChoices("-journal", "design", s, allJournalDesigns)
}

// parseLoad parses -load: the numbers of relay processes whose delivery runs again under
// the CPU hogs, each one of deliveryProcesses, and whether the take-over does.
func parseLoad(s string) ([]int, bool, error) {
	switch strings.TrimSpace(s) {
	case "none", "":
		return nil, false, nil
	case "all":
		return append([]int(nil), deliveryProcesses...), true, nil
	}
	ns, err := parseInts("-load", s)
	if err != nil {
		return nil, false, err
	}
	for _, n := range ns {
		if !slices.Contains(deliveryProcesses, n) {
			return nil, false, fmt.Errorf("-load: %d relay processes: the delivery runs with %v", n, deliveryProcesses)
		}
	}
	return ns, false, nil
}

// parseChain parses -chain: CHAINSxHOPS, each a positive integer up to maxChainSize, or
// "none" (or nothing) for no chain workload.
func parseChain(s string) (chains, hops int, err error) {
	t := strings.TrimSpace(s)
	if t == "" || t == "none" {
		return 0, 0, nil
	}
	c, h, ok := strings.Cut(t, "x")
	chains, cerr := strconv.Atoi(strings.TrimSpace(c))
	hops, herr := strconv.Atoi(strings.TrimSpace(h))
	if !ok || cerr != nil || herr != nil || chains < 1 || hops < 1 || chains > maxChainSize || hops > maxChainSize {
		return 0, 0, fmt.Errorf("-chain: %q is not CHAINSxHOPS (two integers from 1 to %d, as 16x10) nor none", s, maxChainSize)
	}
	return chains, hops, nil
}
