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

	"golang.org/x/sync/errgroup"
)

// variant is one design under measurement. The loop in this file drives every variant the
// same way: setup (timed apart), then handlers, relay and sweeper together for the measured
// window, then finish and check.
type variant interface {
	name() string
	// setup connects, prepares the fresh database and creates the executions.
	setup(ctx context.Context) error
	// handle processes one delivery. processed is false when the event was skipped as a
	// duplicate.
	handle(ctx context.Context, d delivery) (processed bool, err error)
	// relay feeds deliveries to the handlers until the event budget is processed, then
	// returns.
	relay(ctx context.Context, handlers deliveries) error
	// sweep fires the timers due at now.
	sweep(ctx context.Context, now float64) error
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

// deliveries is how a relay hands deliveries to the handlers: the handlers' inboxes, each
// delivery routed to the handler that owns its target.
type deliveries interface {
	// deliver queues d for the handler that owns d.target, waiting while its inbox is full.
	deliver(ctx context.Context, d delivery) error
	// inFlight is the number of deliveries queued or being handled.
	inFlight() int64
}

// Pacing of the shared loop.
const (
	inboxDepth    = 256 // deliveries queued per handler
	sweepInterval = 250 * time.Millisecond
)

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
	latencies []time.Duration
	commands  commandCounts
	path      commandCounts // the commands on the critical path, of commands
	counts    map[string]int64
	callTimes map[string][]time.Duration // store calls made in the window, by kind
	heapStart uint64
	heapEnd   uint64
}

// loop runs the handlers of one run; its inboxes are the deliveries its relay fills.
type loop struct {
	inboxes   []chan delivery
	queued    atomic.Int64
	processed atomic.Int64
	skipped   atomic.Int64

	mu        sync.Mutex
	latencies []time.Duration
}

func newLoop(concurrency int) *loop {
	l := &loop{inboxes: make([]chan delivery, concurrency)}
	for i := range l.inboxes {
		l.inboxes[i] = make(chan delivery, inboxDepth)
	}
	return l
}

func (l *loop) deliver(ctx context.Context, d delivery) error {
	l.queued.Add(1)
	select {
	case l.inboxes[route(d.target, len(l.inboxes))] <- d:
		return nil
	case <-ctx.Done():
		l.queued.Add(-1)
		return ctx.Err()
	}
}

func (l *loop) inFlight() int64 { return l.queued.Load() }

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

	l := newLoop(concurrency)
	p.begin(l)
	cmds0, path0, counts0, times0 := v.commands(), v.pathCommands(), v.counts(), v.callTimes()
	t0 = time.Now()
	if err := l.run(ctx, v); err != nil {
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
	w.latencies = l.latencies

	if err := v.finish(ctx); err != nil {
		return w, err
	}
	return w, nil
}

// run runs the relay, the handlers and the sweeper until the relay is done and every
// delivery is handled, or until one of them fails.
func (l *loop) run(ctx context.Context, v variant) error {
	g, gctx := errgroup.WithContext(ctx)
	var handlers sync.WaitGroup
	for _, inbox := range l.inboxes {
		handlers.Add(1)
		g.Go(func() error {
			defer handlers.Done()
			return l.handler(gctx, v, inbox)
		})
	}
	g.Go(func() error {
		defer func() {
			for _, inbox := range l.inboxes {
				close(inbox)
			}
		}()
		return v.relay(gctx, l)
	})
	stopSweep := make(chan struct{})
	g.Go(func() error { return sweeper(gctx, v, stopSweep) })
	g.Go(func() error {
		handlers.Wait()
		close(stopSweep)
		return nil
	})
	return g.Wait()
}

// handler handles the deliveries of its inbox until the relay closes it, timing each.
func (l *loop) handler(ctx context.Context, v variant, inbox <-chan delivery) error {
	var lat []time.Duration
	defer func() {
		l.mu.Lock()
		l.latencies = append(l.latencies, lat...)
		l.mu.Unlock()
	}()
	for d := range inbox {
		t0 := time.Now()
		processed, err := v.handle(ctx, d)
		elapsed := time.Since(t0)
		l.queued.Add(-1)
		if err != nil {
			return err
		}
		if processed {
			lat = append(lat, elapsed)
			l.processed.Add(1)
		} else {
			l.skipped.Add(1)
		}
	}
	return nil
}

// sweeper sweeps the due timers every sweepInterval until stop is closed.
func sweeper(ctx context.Context, v variant, stop <-chan struct{}) error {
	t := time.NewTicker(sweepInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
		if err := v.sweep(ctx, unixSeconds(time.Now())); err != nil {
			return err
		}
	}
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
			err = errors.Join(err, e.dropDatabase(cctx, spec.database))
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
	case variantRaw:
		return newRaw(cfg, uri, spec.database)
	case variantMemory:
		return newEngine(cfg, &memStore{})
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

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// sortedDurations returns a sorted copy of d.
func sortedDurations(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}
