package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
)

// Shape of the workload.
const (
	definitionID = "bench"
	timerPath    = "Wait.T" // the one durable timer every execution arms or cancels
	traceEvery   = 10       // every traceEvery-th event's commit carries a trace step
	cancelOneIn  = 4        // one event in cancelOneIn cancels the timer instead of arming it
	timerMinMS   = 10       // timers are armed timerMinMS…timerMaxMS ahead
	timerMaxMS   = 100
	maxAttempts  = 16 // commits of one event lost to conflicts before the run gives up
)

// Pacing of the relay and the sweeper. Both scan the whole executions collection on every
// call, so they are paced rather than run flat out: a scan costs the server about as much as
// a few commits.
const (
	relayLimit    = 256                    // outbox entries per PendingOutbox call
	relayMinGap   = 50 * time.Millisecond  // least time between the starts of two partial scans
	relayIdle     = 250 * time.Millisecond // longest pause between scans when no commit is seen
	sweepBatch    = 128                    // timers per DueTimers call
	sweepInterval = 250 * time.Millisecond
	inboxDepth    = 256 // deliveries queued per handler
)

// Streams of the per-event random sources, so that each choice about an event is the same
// whatever order the events are handled in.
const (
	streamHandle    = 1 // the handler's choices: emit target, timer op, timer delay
	streamRedeliver = 2 // the relay's choice to withhold the first ack
)

// event is the payload of every outbox entry.
type event struct {
	ID string `json:"id"`
	N  int    `json:"n"` // events are numbered 0…events-1
}

// snapshot is the executions' Data.
type snapshot struct {
	Handled int    `json:"handled"` // events this execution has processed
	Last    string `json:"last,omitempty"`
}

// delivery is one outbox entry handed to a handler.
type delivery struct {
	target string
	id     string
	n      int
}

// results is what a run measured.
type results struct {
	seedTime   time.Duration
	wall       time.Duration
	events     int   // distinct events processed
	startEvts  int   // of which start events
	commits    int64 // successful commits, the creating ones included
	loads      []time.Duration
	commitLats []time.Duration
	before     aio.Stats // at the first delivery
	after      aio.Stats // once the last event was processed and the outbox drained
	heapStart  uint64
	heapEnd    uint64

	conflicts, duplicates, redelivered, reappeared, acks    int64
	timersArmed, timersCancelled, timersFired, staleDeletes int64
	traced                                                  int64
}

// workload is one run of the engine simulation.
type workload struct {
	cfg   config
	store *aio.Store
	ids   []string       // execution ids
	index map[string]int // execution id → position in ids
	total int            // event budget

	inboxes []chan delivery // one per handler
	kick    chan struct{}   // a commit happened: the relay may have work

	mu           sync.Mutex
	emitted      map[int]int // event number → successful commits that emitted it
	processed    map[int]int // event number → successful commits that processed it
	skippedEarly []string    // events LoadForEvent called processed before any commit processed them
	maxFireAt    float64     // latest fire time ever armed
	loads        []time.Duration
	commitLat    []time.Duration

	processedN  atomic.Int64 // distinct events processed
	inFlight    atomic.Int64 // deliveries handed to a handler and not yet handled
	commits     atomic.Int64
	traced      atomic.Int64
	conflicts   atomic.Int64
	duplicates  atomic.Int64
	redelivered atomic.Int64
	reappeared  atomic.Int64
	acks        atomic.Int64
	armed       atomic.Int64
	cancelled   atomic.Int64
	fired       atomic.Int64
	stale       atomic.Int64
	started     atomic.Int64 // UnixNano of the first delivery; 0 before
}

func newWorkload(cfg config, store *aio.Store) *workload {
	w := &workload{
		cfg:       cfg,
		store:     store,
		ids:       make([]string, cfg.executions),
		index:     make(map[string]int, cfg.executions),
		total:     cfg.events,
		inboxes:   make([]chan delivery, cfg.concurrency),
		kick:      make(chan struct{}, 1),
		emitted:   make(map[int]int, cfg.events),
		processed: make(map[int]int, cfg.events),
	}
	for i := range w.ids {
		w.ids[i] = fmt.Sprintf("exe-%06d", i)
		w.index[w.ids[i]] = i
	}
	for i := range w.inboxes {
		w.inboxes[i] = make(chan delivery, inboxDepth)
	}
	return w
}

// run creates the executions, processes the event budget and returns the measurements.
func (w *workload) run(ctx context.Context) (results, error) {
	var res results
	res.heapStart = heapInUse()

	t0 := time.Now()
	if err := w.seed(ctx); err != nil {
		return res, err
	}
	res.seedTime = time.Since(t0)

	res.before = w.store.Stats()
	t0 = time.Now()
	w.started.Store(t0.UnixNano())
	if err := w.process(ctx); err != nil {
		return res, err
	}
	res.wall = time.Since(t0)
	res.after = w.store.Stats()
	res.heapEnd = heapInUse()

	if err := w.finalSweep(ctx); err != nil {
		return res, err
	}

	w.mu.Lock()
	res.loads, res.commitLats = w.loads, w.commitLat
	w.mu.Unlock()
	res.events = int(w.processedN.Load())
	res.startEvts = min(w.cfg.executions, w.total)
	res.commits = w.commits.Load()
	res.conflicts = w.conflicts.Load()
	res.duplicates = w.duplicates.Load()
	res.redelivered = w.redelivered.Load()
	res.reappeared = w.reappeared.Load()
	res.acks = w.acks.Load()
	res.timersArmed = w.armed.Load()
	res.timersCancelled = w.cancelled.Load()
	res.timersFired = w.fired.Load()
	res.staleDeletes = w.stale.Load()
	res.traced = w.traced.Load()
	return res, nil
}

// seed creates every execution at version 1, the first ones with their start event in the
// outbox addressed to themselves. The creates are submitted together and awaited after.
func (w *workload) seed(ctx context.Context) error {
	data, err := json.Marshal(snapshot{})
	if err != nil {
		return err
	}
	futures := make([]*aio.Future[[]int64], len(w.ids))
	for i, id := range w.ids {
		exe := &execstore.Execution{ID: id, DefinitionID: definitionID, Status: execstore.Running, Data: data}
		var c execstore.Commit
		if i < w.total {
			c.Emits = []execstore.Emit{{TargetID: id, Event: encodeEvent(i)}}
		}
		futures[i] = w.store.CommitAsync(ctx, exe, c)
	}
	var errs []error
	for i, f := range futures {
		if _, err := f.Wait(ctx); err != nil {
			errs = append(errs, fmt.Errorf("creating execution %s: %w", w.ids[i], err))
			continue
		}
		w.commits.Add(1)
		if i < w.total {
			w.mu.Lock()
			w.emitted[i]++
			w.mu.Unlock()
		}
	}
	return errors.Join(errs...)
}

// process runs the relay, the handlers and the timer sweeper until every event of the
// budget is processed and the outbox is drained, or until one of them fails.
func (w *workload) process(ctx context.Context) error {
	g, gctx := errgroup.WithContext(ctx)
	var handlers sync.WaitGroup
	for _, inbox := range w.inboxes {
		handlers.Add(1)
		g.Go(func() error {
			defer handlers.Done()
			return w.handler(gctx, inbox)
		})
	}
	g.Go(func() error {
		defer func() {
			for _, inbox := range w.inboxes {
				close(inbox)
			}
		}()
		return w.relay(gctx)
	})
	stopSweep := make(chan struct{})
	g.Go(func() error { return w.sweeper(gctx, stopSweep) })
	g.Go(func() error {
		handlers.Wait()
		close(stopSweep)
		return nil
	})
	return g.Wait()
}

// relay scans the outbox, hands every entry to the handler of its target and acks it. It
// returns once the budget is processed and a scan finds the outbox empty. After a partial
// scan it waits for a commit (or relayIdle), and never scans again within relayMinGap.
func (w *workload) relay(ctx context.Context) error {
	acked := make(map[int64]bool) // seq → acked (false: delivered, ack withheld)
	idle := time.NewTimer(relayIdle)
	defer idle.Stop()
	for {
		scanned := time.Now()
		entries, err := w.store.PendingOutbox(ctx, relayLimit)
		if err != nil {
			return fmt.Errorf("PendingOutbox: %w", err)
		}
		if len(entries) == 0 {
			if w.processedN.Load() >= int64(w.total) {
				return nil
			}
			if err := w.checkStalled(ctx); err != nil {
				return err
			}
		}
		if err := w.relayEntries(ctx, entries, acked); err != nil {
			return err
		}
		if len(entries) == relayLimit {
			continue
		}
		idle.Reset(relayIdle)
		select {
		case <-w.kick:
		case <-idle.C:
		case <-ctx.Done():
			return ctx.Err()
		}
		if wait := relayMinGap - time.Since(scanned); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
}

// relayEntries hands each entry to the handler of its target and then acks it, one entry at
// a time. An entry whose ack is withheld is delivered again by the next scan.
func (w *workload) relayEntries(ctx context.Context, entries []execstore.OutboxEntry, acked map[int64]bool) error {
	for _, e := range entries {
		d, err := w.parseEntry(e)
		if err != nil {
			return err
		}
		wasAcked, seen := acked[e.Seq]
		if seen {
			w.redelivered.Add(1)
			if wasAcked {
				w.reappeared.Add(1)
			}
		}
		w.inFlight.Add(1)
		select {
		case w.inboxes[w.route(d.target)] <- d:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !seen && w.withholdAck(d.n) {
			acked[e.Seq] = false
			continue
		}
		if err := w.store.AckOutbox(ctx, e.SourceID, e.Seq); err != nil {
			return fmt.Errorf("AckOutbox(%s, %d): %w", e.SourceID, e.Seq, err)
		}
		acked[e.Seq] = true
		w.acks.Add(1)
	}
	return nil
}

// checkStalled is called after a scan found the outbox empty before the budget was
// processed. If no delivery is in flight either, nothing can ever emit the missing events:
// a second scan, made once the handlers are known to be idle, tells a commit that landed
// during the first scan from a lost event.
func (w *workload) checkStalled(ctx context.Context) error {
	if w.inFlight.Load() > 0 {
		return nil
	}
	entries, err := w.store.PendingOutbox(ctx, 1)
	if err != nil {
		return fmt.Errorf("PendingOutbox: %w", err)
	}
	if len(entries) > 0 || w.processedN.Load() >= int64(w.total) {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var lost, never []string
	for n := range w.total {
		if w.processed[n] > 0 {
			continue
		}
		if w.emitted[n] > 0 {
			lost = append(lost, eventID(n))
		} else {
			never = append(never, eventID(n))
		}
	}
	msg := fmt.Sprintf("stalled: %d of %d events processed, the outbox is empty and no delivery is in flight",
		w.processedN.Load(), w.total)
	if len(lost) > 0 {
		msg += fmt.Sprintf("; emitted by a successful commit but never delivered or processed: %s", listed(lost))
	}
	if len(never) > 0 {
		msg += fmt.Sprintf("; never emitted: %s", listed(never))
	}
	if len(w.skippedEarly) > 0 {
		msg += fmt.Sprintf("; skipped as already processed before any commit processed them: %s", listed(w.skippedEarly))
	}
	return errors.New(msg)
}

// route picks the handler that owns an execution, so that one execution's events are
// handled one at a time, in delivery order.
func (w *workload) route(target string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(target))
	return int(h.Sum32() % uint32(len(w.inboxes)))
}

// withholdAck reports whether the relay delivers event n without acking it the first time.
func (w *workload) withholdAck(n int) bool {
	return w.cfg.redeliver > 0 && eventRand(w.cfg.seed, n, streamRedeliver).Float64() < w.cfg.redeliver
}

// handler processes the deliveries of its inbox until the relay closes it.
func (w *workload) handler(ctx context.Context, inbox <-chan delivery) error {
	var loads, commits []time.Duration
	defer func() {
		w.mu.Lock()
		w.loads = append(w.loads, loads...)
		w.commitLat = append(w.commitLat, commits...)
		w.mu.Unlock()
	}()
	for d := range inbox {
		err := w.handle(ctx, d, &loads, &commits)
		w.inFlight.Add(-1)
		if err != nil {
			return err
		}
	}
	return nil
}

// handle processes one delivery: dedupe check, snapshot change, commit, retried on conflict.
func (w *workload) handle(ctx context.Context, d delivery, loads, commits *[]time.Duration) error {
	for attempt := 1; ; attempt++ {
		t0 := time.Now()
		exe, done, err := w.store.LoadForEvent(ctx, d.target, d.id)
		*loads = append(*loads, time.Since(t0))
		if err != nil {
			return fmt.Errorf("LoadForEvent(%s, %s): %w", d.target, d.id, err)
		}
		if exe == nil {
			return fmt.Errorf("event %s is addressed to %s, which does not exist", d.id, d.target)
		}
		if done {
			w.duplicates.Add(1)
			w.mu.Lock()
			if w.processed[d.n] == 0 {
				w.skippedEarly = append(w.skippedEarly, fmt.Sprintf("%s at %s version %d", d.id, d.target, exe.Version))
			}
			w.mu.Unlock()
			return nil
		}
		var snap snapshot
		if err := json.Unmarshal(exe.Data, &snap); err != nil {
			return fmt.Errorf("execution %s: snapshot %q: %w", exe.ID, exe.Data, err)
		}
		snap.Handled++
		snap.Last = d.id
		if exe.Data, err = json.Marshal(snap); err != nil {
			return err
		}
		c, p := w.commitFor(d, snap.Handled)

		t0 = time.Now()
		_, err = w.store.Commit(ctx, exe, c)
		*commits = append(*commits, time.Since(t0))
		if errors.Is(err, execstore.ErrConflict) {
			w.conflicts.Add(1)
			if attempt == maxAttempts {
				return fmt.Errorf("event %s: %d commits of %s in a row lost to conflicts: %w", d.id, attempt, d.target, err)
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("committing %s for event %s: %w", d.target, d.id, err)
		}
		w.committed(d, c, p)
		return nil
	}
}

// plan is what a handler's commit did, for the bookkeeping after it succeeds.
type plan struct {
	child  int     // the event emitted, or -1
	fireAt float64 // the timer armed, 0 when the commit cancels it
}

// commitFor builds the commit that processes d. Its choices come from the event's own random
// source, so a retried commit makes the same ones.
func (w *workload) commitFor(d delivery, handled int) (execstore.Commit, plan) {
	r := eventRand(w.cfg.seed, d.n, streamHandle)
	c := execstore.Commit{ProcessedEventID: d.id}
	p := plan{child: -1}
	if child := d.n + len(w.ids); child < w.total {
		c.Emits = []execstore.Emit{{TargetID: w.other(r, d.target), Event: encodeEvent(child)}}
		p.child = child
	}
	if r.IntN(cancelOneIn) == 0 {
		c.Timers = []execstore.TimerOp{execstore.CancelTimer(timerPath)}
	} else {
		delay := time.Duration(timerMinMS+r.IntN(timerMaxMS-timerMinMS+1)) * time.Millisecond
		p.fireAt = unixSeconds(time.Now().Add(delay))
		c.Timers = []execstore.TimerOp{execstore.ScheduleTimer(timerPath, p.fireAt)}
	}
	if d.n%traceEvery == 0 {
		c.Trace = map[string]any{"event": d.id, "handled": handled}
	}
	return c, p
}

// other picks an execution other than self (self when it is the only one).
func (w *workload) other(r *rand.Rand, self string) string {
	if len(w.ids) == 1 {
		return self
	}
	i := r.IntN(len(w.ids) - 1)
	if i >= w.index[self] {
		i++
	}
	return w.ids[i]
}

// committed records a successful handler commit.
func (w *workload) committed(d delivery, c execstore.Commit, p plan) {
	w.commits.Add(1)
	if c.Trace != nil {
		w.traced.Add(1)
	}
	if p.fireAt != 0 {
		w.armed.Add(1)
	} else {
		w.cancelled.Add(1)
	}
	w.mu.Lock()
	w.processed[d.n]++
	first := w.processed[d.n] == 1
	if p.child >= 0 {
		w.emitted[p.child]++
	}
	w.maxFireAt = max(w.maxFireAt, p.fireAt)
	w.mu.Unlock()
	if first {
		w.processedN.Add(1)
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// sweeper deletes due timers every sweepInterval until stop is closed.
func (w *workload) sweeper(ctx context.Context, stop <-chan struct{}) error {
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
		if err := w.sweep(ctx, unixSeconds(time.Now())); err != nil {
			return err
		}
	}
}

// sweep deletes the timers due at now, each with the guarded delete: a timer re-armed or
// cancelled since the scan is left alone and counted as a stale delete.
func (w *workload) sweep(ctx context.Context, now float64) error {
	for {
		due, err := w.store.DueTimers(ctx, now, sweepBatch)
		if err != nil {
			return fmt.Errorf("DueTimers: %w", err)
		}
		removed := 0
		for _, t := range due {
			ok, err := w.store.DeleteTimer(ctx, t.ExecutionID, t.Path, t.FireAt)
			if err != nil {
				return fmt.Errorf("DeleteTimer(%s, %s, %.3f): %w", t.ExecutionID, t.Path, t.FireAt, err)
			}
			if ok {
				removed++
				w.fired.Add(1)
			} else {
				w.stale.Add(1)
			}
		}
		if len(due) < sweepBatch || removed == 0 {
			return nil
		}
	}
}

// finalSweep waits until every timer ever armed is due and sweeps once more, so that none
// may be left.
func (w *workload) finalSweep(ctx context.Context) error {
	w.mu.Lock()
	last := w.maxFireAt
	w.mu.Unlock()
	if wait := time.Until(time.Unix(0, int64(last*1e9))); wait > 0 {
		select {
		case <-time.After(wait + time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return w.sweep(ctx, max(last, unixSeconds(time.Now())))
}

// parseEntry turns an outbox entry into a delivery, refusing one this run cannot have
// written.
func (w *workload) parseEntry(e execstore.OutboxEntry) (delivery, error) {
	var ev event
	if err := json.Unmarshal(e.Event, &ev); err != nil {
		return delivery{}, fmt.Errorf("outbox entry %d of %s: event %q: %w", e.Seq, e.SourceID, e.Event, err)
	}
	if _, ok := w.index[e.TargetID]; !ok || ev.N < 0 || ev.N >= w.total || ev.ID != eventID(ev.N) {
		return delivery{}, fmt.Errorf("outbox entry %d of %s is not one this run emitted: event %q to %q",
			e.Seq, e.SourceID, e.Event, e.TargetID)
	}
	return delivery{target: e.TargetID, id: ev.ID, n: ev.N}, nil
}

func eventID(n int) string { return fmt.Sprintf("ev-%07d", n) }

func encodeEvent(n int) []byte {
	b, err := json.Marshal(event{ID: eventID(n), N: n})
	if err != nil {
		panic(err) // a struct of a string and an int always encodes
	}
	return b
}

// eventRand returns the random source of one choice stream of event n.
func eventRand(seed uint64, n int, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(n)<<4|stream))
}

func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// heapInUse returns the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
