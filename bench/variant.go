package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// variant is one design under measurement. measure drives every variant the same way: setup
// (timed apart), then run for the measured window, then finish and check.
type variant interface {
	name() string
	// setup connects, prepares the fresh database and creates the executions.
	setup(ctx context.Context) error
	// run delivers the event budget to handlers, concurrency of them at once (one
	// execution's events one at a time), fires the timers, and reports each handled
	// delivery to l; it returns once the budget is processed and nothing is left to deliver.
	run(ctx context.Context, concurrency int, l *loop) error
	// finish runs once the window has closed, before check.
	finish(ctx context.Context) error
	// check verifies the run against the final state. A failed check is a verdict, not an
	// error; an error means the state could not be read.
	check(ctx context.Context) ([]check, error)
	// commands returns the commands the variant's clients have sent so far.
	commands() commandCounts
	// pathCommands returns the commands sent so far on the events' critical path: by the
	// handlers' loads and commits (and, for raw, its writes), not by the relay or the sweeper.
	pathCommands() commandCounts
	// counts returns the variant's own counters so far (conflicts, duplicates, …).
	counts() map[string]int64
	// callTimes returns how long the variant's store calls took so far, by kind; nil for
	// none.
	callTimes() map[string][]time.Duration
	// close releases every client; it is called whatever happened.
	close(ctx context.Context) error
}

// delivery is one event handed to a handler.
type delivery struct {
	target string
	id     string
	n      int    // events are numbered 0…events-1
	source string // raw only: the execution whose outbox holds the event…
	seq    int64  // …and its seq there
}

// runSpec names one run.
type runSpec struct {
	variant     string
	concurrency int
	rtt         time.Duration // the round trip the proxy adds; 0: no proxy
	database    string
}

// window is what the loop measured of one run.
type window struct {
	setup     time.Duration
	wall      time.Duration
	processed int64
	skipped   int64
	latencies []time.Duration // handling times of the processed deliveries
	// delivery holds, for each event delivered in the window, the time from the return of
	// the commit that emitted it to the start of its first handling.
	delivery  []time.Duration
	commands  commandCounts
	path      commandCounts // the commands on the critical path, of commands
	counts    map[string]int64
	callTimes map[string][]time.Duration // store calls made in the window, by kind
	heapStart uint64
	heapEnd   uint64
}

// loop is what one run's window records of its handlers.
type loop struct {
	busy      atomic.Int64
	processed atomic.Int64
	skipped   atomic.Int64

	mu        sync.Mutex
	latencies []time.Duration
	delivery  []time.Duration
}

// started records that a handler took a delivery.
func (l *loop) started() { l.busy.Add(1) }

// handled records a handler's return after elapsed: processed, or skipped as a duplicate.
func (l *loop) handled(processed bool, elapsed time.Duration, err error) {
	l.busy.Add(-1)
	if err != nil {
		return
	}
	if !processed {
		l.skipped.Add(1)
		return
	}
	l.processed.Add(1)
	l.mu.Lock()
	l.latencies = append(l.latencies, elapsed)
	l.mu.Unlock()
}

// deliveredAfter records a first delivery that started d after the commit that emitted it.
func (l *loop) deliveredAfter(d time.Duration) {
	l.mu.Lock()
	l.delivery = append(l.delivery, d)
	l.mu.Unlock()
}

// route picks the handler that owns an execution, so that one execution's events are
// handled one at a time, in delivery order.
func route(target string, handlers int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(target))
	return int(h.Sum32() % uint32(handlers))
}

// measure runs v once at the given concurrency: setup, the measured window, finish. It
// reports progress to p.
func measure(ctx context.Context, v variant, concurrency int, p *progress) (window, error) {
	var w window
	w.heapStart = heapInUse()
	t0 := time.Now()
	if err := v.setup(ctx); err != nil {
		return w, fmt.Errorf("setup: %w", err)
	}
	w.setup = time.Since(t0)

	l := &loop{}
	p.begin(l)
	cmds0, path0, counts0, times0 := v.commands(), v.pathCommands(), v.counts(), v.callTimes()
	t0 = time.Now()
	if err := v.run(ctx, concurrency, l); err != nil {
		return w, err
	}
	w.wall = time.Since(t0)
	w.commands = v.commands().since(cmds0)
	w.path = v.pathCommands().since(path0)
	w.counts = subCounts(v.counts(), counts0)
	w.callTimes = make(map[string][]time.Duration)
	for k, d := range v.callTimes() {
		w.callTimes[k] = d[len(times0[k]):]
	}
	w.heapEnd = heapInUse()
	w.processed, w.skipped = l.processed.Load(), l.skipped.Load()
	w.latencies, w.delivery = l.latencies, l.delivery

	if err := v.finish(ctx); err != nil {
		return w, err
	}
	return w, nil
}

// measured is one run's measurements and verdicts.
type measured struct {
	spec   runSpec
	window window
	checks []check
}

// measureRun builds the variant of spec, measures it, checks it and tears it down.
func (e *environment) measureRun(ctx context.Context, cfg config, spec runSpec, p *progress) (m measured, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.runTimeout)
	defer cancel()
	p.setup(spec.variant, spec.concurrency, spec.rtt)
	defer p.end()
	v := e.newVariant(cfg, spec)
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		err = errors.Join(err, v.close(cctx))
		if !cfg.keep && usesServer(spec.variant) {
			e.dropAtEnd(spec.database)
		}
	}()
	m.spec = spec
	m.window, err = measure(ctx, v, spec.concurrency, p)
	if err != nil {
		// The driver may fail on its socket deadline a moment before ctx reports its own.
		if dl, _ := ctx.Deadline(); time.Until(dl) < 100*time.Millisecond && errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("%w (a run is bounded by -run-timeout %v)", err, cfg.runTimeout)
		}
		return m, err
	}
	m.checks, err = v.check(ctx)
	return m, err
}

// newVariant returns the variant spec names, not yet set up.
func (e *environment) newVariant(cfg config, spec runSpec) variant {
	uri := e.clientURIs[spec.rtt]
	switch spec.variant {
	case variantSeedPort:
		return newEngine(cfg, newSeedPort(uri, spec.database))
	case variantAIO:
		return newEngine(cfg, newAIOStore(variantAIO, uri, spec.database, false, 0))
	case variantBatch:
		return newEngine(cfg, newAIOStore(variantBatch, uri, spec.database, true, 0))
	case variantCache:
		return newEngine(cfg, newAIOStore(variantCache, uri, spec.database, true, cfg.executions))
	case variantOtel:
		s := newAIOStore(variantOtel, uri, spec.database, true, cfg.executions)
		s.withSDK()
		return newEngine(cfg, s)
	case variantRaw:
		return newRaw(cfg, uri, spec.database)
	case variantMemory:
		mem := cfg
		mem.events = cfg.memoryEvents
		return newEngine(mem, &memStore{})
	}
	panic("unknown variant " + spec.variant) // parseVariants admits no other name
}

func subCounts(after, before map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(after))
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// sortedDurations returns a sorted copy of d.
func sortedDurations(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}
