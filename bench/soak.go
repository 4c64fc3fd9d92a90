package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/relay"
	"github.com/execstore/execstore/server"
)

// The soak (-soak N) drives N events through executions kept at a steady number alive
// (-soak-live), all in one database, while a simulated clock runs ahead of the wall clock by
// an offset that grows with every event driven, -soak-days over the N events. One relay
// delivers the outbox and deletes the finished executions past their retention, by that
// clock; one sweeper fires the timers, by the wall clock. At each checkpoint it counts the
// collection's documents and checks them against what the retention must have left, and
// measures what a scan, a sweep, a retention read and a listing page cost there.
//
// The finish time a commit records is the committer's wall clock (ops.CommitTime), while the
// retention's cutoffs are the simulated clock's: an execution finished at wall time T is
// deleted once simulated now − its status's retention ≥ T. With an offset o(t) at wall time
// t, that is once o(now) ≥ retention − (now − T): an execution finished when the offset was o
// is kept retention − o of simulated time. Executions that finish once the offset is past a
// status's retention are deleted at the first pass of the retention after they hold nothing
// more, so the collection first grows with the finished executions of the first retention
// span and then holds the live ones and those finished in the last moments.

// Shape of the soak.
const (
	soakLanes = 64 // the relay's and the sweeper's lanes: the handlers
	// soakRetentionInterval is the relay's RetentionInterval.
	soakRetentionInterval = time.Second
	soakMinLife           = 3 // events an execution handles, from soakMinLife to soakMaxLife
	soakMaxLife           = 8
	soakTimerMinMS        = 10
	soakTimerMaxMS        = 100
	soakFailedPer100      = 5 // executions that end Failed, per 100; as many end Cancelled; the rest Done
	soakCancelledPer100   = 5
	soakCreateLimit       = 16  // executions created at once at the start
	soakMaxAttempts       = 16  // commits of one event lost to conflicts before the soak gives up
	soakStaleReads        = 200 // reads of a snapshot older than the event before the soak gives up (some 19 s)
	// soakStallAfter is how long the soak waits with no event driven before it gives up.
	soakStallAfter = 2 * time.Minute
	// soakSampleEvery is how often the driven events are sampled (for the clock's past
	// offsets) and the checkpoints looked for.
	soakSampleEvery = 20 * time.Millisecond
)

// soakSnapshot is the Data of a soak execution.
type soakSnapshot struct {
	Life    int              `json:"life"`    // events it handles in all
	Handled int              `json:"handled"` // events it has handled
	End     execstore.Status `json:"end"`     // the status it finishes in
}

// simClock is the soak's simulated clock: the wall clock plus perEvent nanoseconds for every
// event driven. It keeps the offsets it had (sample), so that a past cutoff can be told.
type simClock struct {
	perEvent float64 // simulated nanoseconds per event driven
	driven   *atomic.Int64

	mu      sync.Mutex
	samples []offsetSample // in wall order
}

// offsetSample is the clock's offset at a wall time.
type offsetSample struct {
	wall   time.Time
	offset time.Duration
}

func (c *simClock) offset() time.Duration {
	return time.Duration(float64(c.driven.Load()) * c.perEvent)
}

// now is the simulated time: the relay's Options.Clock.
func (c *simClock) now() time.Time { return time.Now().Add(c.offset()) }

// sample records the offset now.
func (c *simClock) sample() {
	s := offsetSample{wall: time.Now(), offset: c.offset()}
	c.mu.Lock()
	c.samples = append(c.samples, s)
	c.mu.Unlock()
}

// offsetAt is the offset at wall time t, at most: the last one sampled at or before t (the
// offset only grows); 0 before the first sample.
func (c *simClock) offsetAt(t time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	i, _ := slices.BinarySearchFunc(c.samples, t, func(s offsetSample, t time.Time) int { return s.wall.Compare(t) })
	for i < len(c.samples) && !c.samples[i].wall.After(t) {
		i++
	}
	if i == 0 {
		return 0
	}
	return c.samples[i-1].offset
}

// soakRun is one soak on one database.
type soakRun struct {
	cfg      config
	env      *environment
	database string
	stores   *aioStore // the handlers' store (stores.aio) and the relay's (stores.bg)
	probe    *aio.Store
	clock    *simClock
	relay    *relay.Relay
	sweeper  *relay.Sweeper
	fatal    context.CancelCauseFunc
	started  time.Time

	driven     atomic.Int64 // events processed (each once)
	duplicates atomic.Int64 // deliveries skipped as already processed
	conflicts  atomic.Int64
	staleLoads atomic.Int64 // loads that returned a snapshot older than the event's
	retainErrs atomic.Int64
	lastErr    atomic.Value // the last retention error's text

	mu       sync.Mutex
	created  int // executions created or being created
	assigned int // events given to the executions created
	finished [3][]int64
}

// soakStatuses are the finished statuses, in the order of soakRun.finished.
var soakStatuses = []execstore.Status{execstore.Done, execstore.Failed, execstore.Cancelled}

// soak runs the soak and reports it; its status is 1 when a checkpoint's bound failed.
func soak(ctx context.Context, cfg config) (status int, err error) {
	cfg.rtts = []time.Duration{0}
	cfg.variants = []string{variantBatch} // a server is needed
	env, err := startEnvironment(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, env.close()) }()
	report, err := runSoak(ctx, cfg, env)
	if err != nil {
		return 1, err
	}
	return report.write(cfg)
}

// runSoak drives the soak on a fresh database of env's server, dropped at the end unless
// -keep, and returns its checkpoints.
func runSoak(ctx context.Context, cfg config, env *environment) (_ *soakReport, err error) {
	s := &soakRun{cfg: cfg, env: env,
		database: fmt.Sprintf("bench_%s_%d_soak", time.Now().UTC().Format("20060102_150405"), os.Getpid())}
	s.clock = &simClock{perEvent: float64(cfg.soakDays*24*float64(time.Hour)) / float64(cfg.soakEvents), driven: &s.driven}
	s.stores = newAIOStore("soak", env.uri, s.database, true, 2*cfg.soakLive)
	defer func() {
		err = errors.Join(err, env.tearDown(ctx, cfg, s.database, func(ctx context.Context) error {
			var err error
			if s.probe != nil {
				err = s.probe.Close(ctx)
			}
			return errors.Join(err, s.stores.close(ctx))
		}))
	}()
	if err := s.stores.open(ctx); err != nil {
		return nil, err
	}
	// The measurements' own store and client: their commands are not the soak's.
	if s.probe, err = aio.Open(ctx, env.uri, aio.Options{Connection: server.Connection{Database: s.database,
		ClientOptions: options.Client()}}); err != nil {
		return nil, err
	}
	return s.drive(ctx)
}

// drive creates the first executions, runs the relay, the sweeper and the checkpoints until
// every event is driven, and returns the report.
func (s *soakRun) drive(ctx context.Context) (*soakReport, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	s.fatal = cancel
	retention := s.cfg.soakRetention
	opts := relay.Options{Lanes: soakLanes, PollInterval: pollInterval, ScanGap: relayGap,
		Retention: &retention, RetentionInterval: soakRetentionInterval, Clock: s.clock.now,
		OnError: func(err error) {
			re := (*relay.Error)(nil)
			switch {
			case !errors.As(err, &re):
			case re.Op == relay.OpHandle:
				cancel(err) // the handlers fail only on what must not happen
			case re.Op == relay.OpRetain:
				s.retainErrs.Add(1)
				s.lastErr.Store(err.Error())
			}
		}}
	bg := s.stores.relayStore()
	s.relay = relay.New(bg, s.deliver, opts)
	sweepOpts := opts
	sweepOpts.ScanGap, sweepOpts.Retention, sweepOpts.Clock = sweepGap, nil, nil
	s.sweeper = relay.NewSweeper(bg, s.fire, sweepOpts)

	report := &soakReport{server: s.env.description, cfg: s.cfg}
	s.started = time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.relay.Run(gctx) })
	g.Go(func() error { return s.sweeper.Run(gctx) })
	g.Go(func() error {
		err := s.createFirst(gctx)
		if err == nil {
			err = s.checkpoints(gctx, report)
		}
		cctx, ccancel := cleanupContext(ctx)
		defer ccancel()
		return errors.Join(err, s.relay.Close(cctx), s.sweeper.Close(cctx))
	})
	err := g.Wait()
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return nil, cause
	}
	if err != nil {
		return nil, err
	}
	report.wall = time.Since(s.started)
	report.events = s.driven.Load()
	report.commands = s.stores.commands()
	report.relay, report.sweeper = s.relay.Stats(), s.sweeper.Stats()
	report.duplicates, report.conflicts, report.staleLoads = s.duplicates.Load(), s.conflicts.Load(), s.staleLoads.Load()
	report.retentionErrors = s.retainErrs.Load()
	if e, ok := s.lastErr.Load().(string); ok {
		report.lastRetentionError = e
	}
	return report, nil
}

// createFirst creates -soak-live executions, fewer when the budget has events for fewer.
func (s *soakRun) createFirst(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(soakCreateLimit)
	for range s.cfg.soakLive {
		g.Go(func() error { return s.createNext(gctx) })
	}
	return g.Wait()
}

// createNext creates the next execution with its first event in its outbox, unless every
// event of the budget is given to one already.
func (s *soakRun) createNext(ctx context.Context) error {
	s.mu.Lock()
	if s.assigned >= s.cfg.soakEvents {
		s.mu.Unlock()
		return nil
	}
	k := s.created
	r := rand.New(rand.NewPCG(s.cfg.seed, uint64(k)))
	snap := soakSnapshot{Life: min(soakMinLife+r.IntN(soakMaxLife-soakMinLife+1), s.cfg.soakEvents-s.assigned), End: execstore.Done}
	switch n := r.IntN(100); {
	case n < soakFailedPer100:
		snap.End = execstore.Failed
	case n < soakFailedPer100+soakCancelledPer100:
		snap.End = execstore.Cancelled
	}
	s.created++
	s.assigned += snap.Life
	s.mu.Unlock()
	data, err := json.Marshal(snap)
	if err != nil {
		return err
	}
	id := soakID(k)
	exe := &execstore.Execution{ID: id, DefinitionID: definitionID, Status: execstore.Running, Data: data}
	if _, err := s.stores.aio.Commit(ctx, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: id, Event: soakEvent(0)}}}); err != nil {
		return fmt.Errorf("creating execution %s: %w", id, err)
	}
	return nil
}

func soakID(k int) string { return fmt.Sprintf("soak-%08d", k) }

func soakEvent(step int) []byte { return []byte(strconv.Itoa(step)) }

// soakTimerPath is the path of the timer that delivers an execution's event step.
func soakTimerPath(step int) string { return "Wait" + strconv.Itoa(step) }

// deliver is the relay's handler: it handles the event an outbox entry carries.
func (s *soakRun) deliver(ctx context.Context, e execstore.OutboxEntry) error {
	step, err := strconv.Atoi(string(e.Event))
	if err != nil || e.TargetID == "" {
		return fmt.Errorf("outbox entry %d of %s is not one the soak emitted: %q to %q", e.Seq, e.SourceID, e.Event, e.TargetID)
	}
	return s.handle(ctx, e.TargetID, step)
}

// fire is the sweeper's handler: it handles the event a timer delivers.
func (s *soakRun) fire(ctx context.Context, t execstore.DueTimer) error {
	rest, ok := strings.CutPrefix(t.Path, "Wait")
	step, err := strconv.Atoi(rest)
	if !ok || err != nil {
		return fmt.Errorf("timer %s of %s is not one the soak armed", t.Path, t.ExecutionID)
	}
	return s.handle(ctx, t.ExecutionID, step)
}

// handle processes event step of execution id: skipped when already processed; otherwise a
// commit that either hands the next step on (an emit to itself, or a timer) or finishes the
// execution, which a new execution then replaces.
func (s *soakRun) handle(ctx context.Context, id string, step int) error {
	eventID := id + "/" + strconv.Itoa(step)
	stale := 0
	for attempt := 1; ; attempt++ {
		exe, done, err := s.stores.aio.LoadForEvent(ctx, id, eventID)
		if err != nil {
			return fmt.Errorf("load for event %s: %w", eventID, err)
		}
		if exe == nil {
			return fmt.Errorf("event %s: execution %s does not exist", eventID, id)
		}
		if done {
			s.duplicates.Add(1)
			return nil
		}
		var snap soakSnapshot
		if err := json.Unmarshal(exe.Data, &snap); err != nil {
			return fmt.Errorf("execution %s: snapshot %q: %w", id, exe.Data, err)
		}
		if snap.Handled < step && stale < soakStaleReads {
			// A snapshot older than the commit that emitted the event, which handed the event
			// to the relay before its answer was in: the handlers' store's cache holds the
			// older one until then. Read it again a little later.
			s.staleLoads.Add(1)
			stale++
			time.Sleep(min(time.Millisecond<<min(stale, 7), 100*time.Millisecond))
			continue
		}
		if snap.Handled > step {
			// Handled already: a redelivery (a lease lost, an ack not yet done) that the
			// cache's dedupe ids did not know of (they are those it saw since it took the
			// snapshot); the commit's dedupe guard would refuse it.
			s.duplicates.Add(1)
			return nil
		}
		if snap.Handled != step {
			return fmt.Errorf("event %s arrived at execution %s after %d events", eventID, id, snap.Handled)
		}
		snap.Handled++
		c := execstore.Commit{ProcessedEventID: eventID}
		last := snap.Handled == snap.Life
		r := rand.New(rand.NewPCG(s.cfg.seed, hashID(eventID)))
		switch {
		case last:
			exe.Status = snap.End
		case s.cfg.soakTimerOneIn > 0 && r.IntN(s.cfg.soakTimerOneIn) == 0:
			delay := time.Duration(soakTimerMinMS+r.IntN(soakTimerMaxMS-soakTimerMinMS+1)) * time.Millisecond
			c.Timers = []execstore.TimerOp{execstore.ScheduleTimer(soakTimerPath(snap.Handled), time.Now().Add(delay))}
		default:
			c.Emits = []execstore.Emit{{TargetID: id, Event: soakEvent(snap.Handled)}}
		}
		if exe.Data, err = json.Marshal(snap); err != nil {
			return err
		}
		_, err = s.stores.aio.Commit(ctx, exe, c)
		switch {
		case errors.Is(err, execstore.ErrConflict):
			s.conflicts.Add(1)
			if attempt == soakMaxAttempts {
				return fmt.Errorf("event %s: %d commits in a row lost to conflicts: %w", eventID, attempt, err)
			}
			continue
		case errors.Is(err, execstore.ErrAlreadyProcessed):
			s.duplicates.Add(1)
			return nil
		case err != nil:
			return fmt.Errorf("committing event %s: %w", eventID, err)
		}
		finishedBy := time.Now()
		s.driven.Add(1)
		if !last {
			return nil
		}
		s.mu.Lock()
		i := slices.Index(soakStatuses, snap.End)
		s.finished[i] = append(s.finished[i], finishedBy.UnixNano())
		s.mu.Unlock()
		if err := s.createNext(ctx); err != nil {
			s.fatal(err) // the handler's retry would find its event processed and create none
			return err
		}
		return nil
	}
}

// hashID is a 64-bit FNV-1a hash of id, for the per-event random sources.
func hashID(id string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(id))
	return h.Sum64()
}
