package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
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
	createLimit  = 16 // executions created at once during setup
)

// Pacing of the relay and the sweep. Both scan the executions collection on every call, so
// they are paced rather than run flat out: a scan costs the server about as much as a few
// commits.
const (
	relayLimit  = 256                    // outbox entries per pending-outbox call
	relayMinGap = 50 * time.Millisecond  // least time between the starts of two partial scans
	relayIdle   = 250 * time.Millisecond // longest pause between scans when no commit is seen
	sweepBatch  = 128                    // timers per due-timers call
)

// Streams of the per-event random sources, so that each choice about an event is the same
// whatever order the events are handled in.
const (
	streamHandle    = 1 // the handler's choices: emit target, timer op, timer delay
	streamRedeliver = 2 // the relay's choice to withhold the first ack
)

// execStore is what the engine workload needs of a store: the calls an engine makes, and
// what the checks read at the end. The async store and the seed port implement it.
type execStore interface {
	name() string
	// open connects and prepares the fresh database.
	open(ctx context.Context) error
	// loadForEvent returns the execution and whether eventID was already processed.
	loadForEvent(ctx context.Context, id, eventID string) (*execstore.Execution, bool, error)
	// commit writes exe at exe.Version+1 with c, or fails with an error matching
	// execstore.ErrConflict; on success it advances exe.Version. Version 0 creates.
	commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) error
	pendingOutbox(ctx context.Context, limit int) ([]pendingEntry, error)
	ackOutbox(ctx context.Context, e pendingEntry) error
	// concurrentAcks reports whether the relay acks a scan's entries all at once, as a user of
	// an asynchronous store does, rather than one after the other.
	concurrentAcks() bool
	dueTimers(ctx context.Context, now float64, limit int) ([]execstore.DueTimer, error)
	deleteTimer(ctx context.Context, t execstore.DueTimer) (bool, error)
	// bulkTimerDeletes reports whether the sweeper deletes a sweep's due timers with one
	// deleteTimers call, as a user of a store's batch calls does, rather than one after the
	// other with deleteTimer.
	bulkTimerDeletes() bool
	// deleteTimers deletes each of ts that still fires at its FireAt; used only when
	// bulkTimerDeletes is true.
	deleteTimers(ctx context.Context, ts []execstore.DueTimer) error
	// final reads what the checks need: every execution of ids, in that order, the pending
	// outbox and the timers due by horizon.
	final(ctx context.Context, ids []string, horizon float64) (finalState, error)
	// commands returns the commands the store's clients have sent so far; pathCommands those
	// of the client that serves loadForEvent and commit, the events' critical path.
	commands() commandCounts
	pathCommands() commandCounts
	counts() map[string]int64
	close(ctx context.Context) error
}

// pendingEntry is an undelivered outbox entry.
type pendingEntry struct {
	execstore.OutboxEntry
	stored bson.Raw // the entry as stored, for a store that acks by the whole entry; else nil
}

// finalState is what the checks read of a store at the end of a run.
type finalState struct {
	exes    []storedExecution
	pending []pendingEntry
	timers  []execstore.DueTimer
}

// storedExecution is one execution as stored at the end of a run.
type storedExecution struct {
	id      string
	found   bool
	version int64
	data    []byte
	traced  int64  // trace steps the store recorded
	problem string // an inconsistency the store found in its own document; "" for none
}

// event is the payload of every outbox entry.
type eventPayload struct {
	ID string `json:"id"`
	N  int    `json:"n"`
}

// snapshot is the executions' Data.
type snapshot struct {
	Handled int    `json:"handled"` // events this execution has processed
	Last    string `json:"last,omitempty"`
}

// workload is one run of the engine simulation over an execStore; it is the variant the
// loop drives for every design that has a store.
type workload struct {
	cfg   config
	store execStore
	ids   []string       // execution ids
	index map[string]int // execution id → position in ids
	total int            // event budget
	kick  chan struct{}  // a commit happened or a handler returned: the relay may have work

	// The hand-off between the relay and the handlers (see relay): the entries delivered
	// whose handler has not returned yet, by event number, and those whose handler returned
	// nil, for the relay to ack.
	relayMu  sync.Mutex
	awaiting map[int][]pendingEntry
	handled  []handledEntry

	mu           sync.Mutex
	emitted      map[int]int // event number → successful commits that emitted it
	processed    map[int]int // event number → successful commits that processed it
	skippedEarly []string    // events called processed before any commit processed them
	maxFireAt    float64     // latest fire time ever armed

	timings opTimings // store calls as the workload sees them, by kind

	processedN  atomic.Int64 // distinct events processed
	commits     atomic.Int64
	traced      atomic.Int64
	conflicts   atomic.Int64
	duplicates  atomic.Int64 // deliveries skipped as already processed…
	refused     atomic.Int64 // …of which the commit's dedupe guard refused
	redelivered atomic.Int64
	reappeared  atomic.Int64
	acks        atomic.Int64
	armed       atomic.Int64
	cancelled   atomic.Int64
	fired       atomic.Int64
	stale       atomic.Int64
	bulkDeleted atomic.Int64 // timers passed to deleteTimers, fired or stale
}

func newEngine(cfg config, store execStore) *workload {
	w := &workload{
		cfg:       cfg,
		store:     store,
		ids:       executionIDs(cfg.executions),
		total:     cfg.events,
		kick:      make(chan struct{}, 1),
		awaiting:  make(map[int][]pendingEntry),
		emitted:   make(map[int]int, cfg.events),
		processed: make(map[int]int, cfg.events),
	}
	w.index = make(map[string]int, len(w.ids))
	for i, id := range w.ids {
		w.index[id] = i
	}
	return w
}

func executionIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("exe-%06d", i)
	}
	return ids
}

func (w *workload) name() string                          { return w.store.name() }
func (w *workload) callTimes() map[string][]time.Duration { return w.timings.snapshot() }
func (w *workload) commands() commandCounts               { return w.store.commands() }
func (w *workload) pathCommands() commandCounts           { return w.store.pathCommands() }
func (w *workload) close(ctx context.Context) error       { return w.store.close(ctx) }

func (w *workload) counts() map[string]int64 {
	c := map[string]int64{
		"conflicts":           w.conflicts.Load(),
		"duplicates_skipped":  w.duplicates.Load(),
		"refused_by_commit":   w.refused.Load(),
		"redelivered":         w.redelivered.Load(),
		"acks":                w.acks.Load(),
		"timers_armed":        w.armed.Load(),
		"timers_cancelled":    w.cancelled.Load(),
		"timers_fired":        w.fired.Load(),
		"stale_deletes":       w.stale.Load(),
		"timers_bulk_deleted": w.bulkDeleted.Load(),
		"traced":              w.traced.Load(),
	}
	for k, v := range w.store.counts() {
		c[k] = v
	}
	return c
}

// setup opens the store and creates every execution at version 1, the first ones with their
// start event in the outbox addressed to themselves.
func (w *workload) setup(ctx context.Context) error {
	if err := w.store.open(ctx); err != nil {
		return err
	}
	data, err := json.Marshal(snapshot{})
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(createLimit)
	for i, id := range w.ids {
		g.Go(func() error {
			exe := &execstore.Execution{ID: id, DefinitionID: definitionID, Status: execstore.Running, Data: data}
			var c execstore.Commit
			if i < w.total {
				c.Emits = []execstore.Emit{{TargetID: id, Event: encodeEvent(i)}}
			}
			if err := w.store.commit(gctx, exe, c); err != nil {
				return fmt.Errorf("creating execution %s: %w", id, err)
			}
			w.commits.Add(1)
			if i < w.total {
				w.mu.Lock()
				w.emitted[i]++
				w.mu.Unlock()
			}
			return nil
		})
	}
	return g.Wait()
}

// relay scans the outbox, hands every entry to the handler of its target, and acks an entry
// only once the handler it was delivered to has returned nil for it: an entry is acked at least
// once, and never before it was handled, so a relay that stops loses nothing. The entries it
// delivered and has not acked are in flight: a scan returns them until they are acked, and the
// relay does not deliver them again meanwhile. Each time round it first acks, as one batch,
// every entry whose handler returned since the last time (so that the scan that follows no
// longer returns them), then scans and delivers what is new. It returns once the budget is
// processed and a scan finds the outbox empty. After a partial scan, or a full one with nothing
// new to deliver, it waits for a commit or a handler's return (or relayIdle), and never scans
// again within relayMinGap.
func (w *workload) relay(ctx context.Context, handlers deliveries) error {
	relayed := make(map[int64]relayedEntry)
	idle := time.NewTimer(relayIdle)
	defer idle.Stop()
	for {
		if err := w.ackHandled(ctx, relayed); err != nil {
			return err
		}
		scanned := time.Now()
		entries, err := w.store.pendingOutbox(ctx, relayLimit)
		w.timings.add("pending_outbox", scanned)
		if err != nil {
			return fmt.Errorf("pending outbox: %w", err)
		}
		if len(entries) == 0 {
			if w.processedN.Load() >= int64(w.total) {
				return nil
			}
			if err := w.checkStalled(ctx, handlers); err != nil {
				return err
			}
		}
		fresh, err := w.relayEntries(ctx, handlers, entries, relayed)
		if err != nil {
			return err
		}
		if len(entries) == relayLimit && fresh > 0 {
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

// relayedEntry is what the relay knows of an outbox entry it has delivered.
type relayedEntry struct {
	inFlight bool // delivered, and its handler has not returned or its ack not yet
	withheld bool // its first ack was withheld: it is delivered again
	acked    bool // an ack of it returned nil
}

// relayEntries hands every entry of a scan that is not in flight to the handler of its target,
// and reports how many it handed. An entry delivered before (its ack withheld, or one that came
// back after its ack) is counted as redelivered.
func (w *workload) relayEntries(ctx context.Context, handlers deliveries, entries []pendingEntry, relayed map[int64]relayedEntry) (int, error) {
	fresh := 0
	for _, e := range entries {
		r, seen := relayed[e.Seq]
		if r.inFlight {
			continue // with a handler, or handled and not acked yet
		}
		d, err := w.parseEntry(e.OutboxEntry)
		if err != nil {
			return fresh, err
		}
		if seen {
			w.redelivered.Add(1)
			if r.acked {
				w.reappeared.Add(1)
			}
		}
		r.inFlight = true
		relayed[e.Seq] = r
		w.relayMu.Lock()
		w.awaiting[d.n] = append(w.awaiting[d.n], e)
		w.relayMu.Unlock()
		if err := handlers.deliver(ctx, d); err != nil {
			return fresh, err
		}
		fresh++
	}
	return fresh, nil
}

// handledEntry is an entry whose handler returned nil, and the event number it carries.
type handledEntry struct {
	entry pendingEntry
	n     int
}

// finished hands the entry of d, whose handler returned nil, back to the relay to ack.
func (w *workload) finished(d delivery) {
	w.relayMu.Lock()
	entries := w.awaiting[d.n]
	for i, e := range entries {
		if e.TargetID == d.target {
			w.handled = append(w.handled, handledEntry{e, d.n})
			entries = slices.Delete(entries, i, i+1)
			break
		}
	}
	if len(entries) == 0 {
		delete(w.awaiting, d.n)
	} else {
		w.awaiting[d.n] = entries
	}
	w.relayMu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// ackHandled acks every entry whose handler returned nil since the last call, as one batch: one
// at a time for a synchronous store, all at once for an asynchronous one (which coalesces
// them). The first handling of an entry chosen by withholdAck is not acked: the entry leaves
// the in-flight set, and the next scan delivers it again.
func (w *workload) ackHandled(ctx context.Context, relayed map[int64]relayedEntry) error {
	w.relayMu.Lock()
	batch := w.handled
	w.handled = nil
	w.relayMu.Unlock()
	var toAck []pendingEntry
	for _, h := range batch {
		r := relayed[h.entry.Seq]
		if !r.withheld && w.withholdAck(h.n) {
			r.withheld, r.inFlight = true, false
			relayed[h.entry.Seq] = r
			continue
		}
		toAck = append(toAck, h.entry)
	}
	g, gctx := errgroup.WithContext(ctx)
	if !w.store.concurrentAcks() {
		g.SetLimit(1)
	}
	for _, e := range toAck {
		g.Go(func() error {
			t0 := time.Now()
			err := w.store.ackOutbox(gctx, e)
			w.timings.add("ack", t0)
			if err != nil {
				return fmt.Errorf("ack outbox (%s, %d): %w", e.SourceID, e.Seq, err)
			}
			w.acks.Add(1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for _, e := range toAck {
		relayed[e.Seq] = relayedEntry{withheld: relayed[e.Seq].withheld, acked: true}
	}
	return nil
}

// checkStalled is called after a scan found the outbox empty before the budget was
// processed. If no delivery is in flight either, nothing can ever emit the missing events:
// a second scan, made once the handlers are known to be idle, tells a commit that landed
// during the first scan from a lost event.
func (w *workload) checkStalled(ctx context.Context, handlers deliveries) error {
	if handlers.inFlight() > 0 {
		return nil
	}
	entries, err := w.store.pendingOutbox(ctx, 1)
	if err != nil {
		return fmt.Errorf("pending outbox: %w", err)
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

// withholdAck reports whether the relay leaves the entry of event n unacked after its first
// handling.
func (w *workload) withholdAck(n int) bool {
	return w.cfg.redeliver > 0 && eventRand(w.cfg.seed, n, streamRedeliver).Float64() < w.cfg.redeliver
}

// handle processes one delivery (see process) and, when that returned nil, hands its entry
// back to the relay to ack.
func (w *workload) handle(ctx context.Context, d delivery) (bool, error) {
	processed, err := w.process(ctx, d)
	if err == nil {
		w.finished(d)
	}
	return processed, err
}

// process processes one delivery: dedupe check, snapshot change, commit, retried on conflict.
func (w *workload) process(ctx context.Context, d delivery) (bool, error) {
	for attempt := 1; ; attempt++ {
		t0 := time.Now()
		exe, done, err := w.store.loadForEvent(ctx, d.target, d.id)
		w.timings.add("load_for_event", t0)
		if err != nil {
			return false, fmt.Errorf("load for event (%s, %s): %w", d.target, d.id, err)
		}
		if exe == nil {
			return false, fmt.Errorf("event %s is addressed to %s, which does not exist", d.id, d.target)
		}
		if done {
			w.duplicate(d, exe.Version)
			return false, nil
		}
		var snap snapshot
		if err := json.Unmarshal(exe.Data, &snap); err != nil {
			return false, fmt.Errorf("execution %s: snapshot %q: %w", exe.ID, exe.Data, err)
		}
		snap.Handled++
		snap.Last = d.id
		if exe.Data, err = json.Marshal(snap); err != nil {
			return false, err
		}
		c, p := eventCommit(w.cfg.seed, w.ids, w.index, w.total, d, snap.Handled)

		t0 = time.Now()
		err = w.store.commit(ctx, exe, c)
		w.timings.add("commit", t0)
		if errors.Is(err, execstore.ErrConflict) {
			w.conflicts.Add(1)
			if attempt == maxAttempts {
				return false, fmt.Errorf("event %s: %d commits of %s in a row lost to conflicts: %w", d.id, attempt, d.target, err)
			}
			continue
		}
		// The commit's dedupe guard refused an event LoadForEvent did not know was processed
		// (a store answering from its cache): a duplicate, as if LoadForEvent had said so.
		if errors.Is(err, execstore.ErrAlreadyProcessed) {
			version := exe.Version
			if dup := (*execstore.AlreadyProcessedError)(nil); errors.As(err, &dup) {
				version = dup.Version
			}
			w.refused.Add(1)
			w.duplicate(d, version)
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("committing %s for event %s: %w", d.target, d.id, err)
		}
		w.committed(d, c, p)
		return true, nil
	}
}

// duplicate records a delivery skipped as already processed, found so at version (by
// LoadForEvent, or by the commit's dedupe guard), and an early skip if no successful commit
// had processed it yet.
func (w *workload) duplicate(d delivery, version int64) {
	w.duplicates.Add(1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.processed[d.n] == 0 {
		w.skippedEarly = append(w.skippedEarly, fmt.Sprintf("%s at %s version %d", d.id, d.target, version))
	}
}

// plan is what a handler's commit did, for the bookkeeping after it succeeds.
type plan struct {
	child  int     // the event emitted, or -1
	target string  // the execution it is addressed to
	fireAt float64 // the timer armed, 0 when the commit cancels it
}

// eventCommit builds the commit that processes d, for a run of the given seed, executions and
// event budget. Its choices come from the event's own random source, so a retried commit
// makes the same ones, and every variant makes the same ones.
func eventCommit(seed uint64, ids []string, index map[string]int, total int, d delivery, handled int) (execstore.Commit, plan) {
	r := eventRand(seed, d.n, streamHandle)
	c := execstore.Commit{ProcessedEventID: d.id}
	p := plan{child: -1}
	if child := d.n + len(ids); child < total {
		p.child, p.target = child, otherExecution(r, ids, index, d.target)
		c.Emits = []execstore.Emit{{TargetID: p.target, Event: encodeEvent(child)}}
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

// otherExecution picks an execution other than self (self when it is the only one).
func otherExecution(r *rand.Rand, ids []string, index map[string]int, self string) string {
	if len(ids) == 1 {
		return self
	}
	i := r.IntN(len(ids) - 1)
	if i >= index[self] {
		i++
	}
	return ids[i]
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

// sweep deletes the timers due at now, each with the guarded delete: a timer re-armed or
// cancelled since the scan is left alone and counted as a stale delete. A store that deletes
// in bulk gets each scan's timers in one deleteTimers call, which does not tell the timers it
// removed from the stale ones: they are counted together.
func (w *workload) sweep(ctx context.Context, now float64) error {
	for {
		t0 := time.Now()
		due, err := w.store.dueTimers(ctx, now, sweepBatch)
		w.timings.add("due_timers", t0)
		if err != nil {
			return fmt.Errorf("due timers: %w", err)
		}
		if w.store.bulkTimerDeletes() {
			if len(due) == 0 {
				return nil
			}
			t0 := time.Now()
			err := w.store.deleteTimers(ctx, due)
			w.timings.add("delete_timers", t0)
			if err != nil {
				return fmt.Errorf("delete timers (%d of them): %w", len(due), err)
			}
			w.bulkDeleted.Add(int64(len(due)))
			if len(due) < sweepBatch {
				return nil
			}
			continue
		}
		removed := 0
		for _, t := range due {
			t0 := time.Now()
			ok, err := w.store.deleteTimer(ctx, t)
			w.timings.add("delete_timer", t0)
			if err != nil {
				return fmt.Errorf("delete timer (%s, %s, %.3f): %w", t.ExecutionID, t.Path, t.FireAt, err)
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

// finish waits until every timer ever armed is due and sweeps once more, so that none may be
// left.
func (w *workload) finish(ctx context.Context) error {
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
	var ev eventPayload
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
	b, err := json.Marshal(eventPayload{ID: eventID(n), N: n})
	if err != nil {
		panic(err) // a struct of a string and an int always encodes
	}
	return b
}

// eventRand returns the random source of one choice stream of event n.
func eventRand(seed uint64, n int, stream uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, uint64(n)<<4|stream))
}

// opTimings records how long store calls take, by kind.
type opTimings struct {
	mu sync.Mutex
	by map[string][]time.Duration
}

// add records a call of kind that started at t0 and has just returned.
func (t *opTimings) add(kind string, t0 time.Time) {
	d := time.Since(t0)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.by == nil {
		t.by = make(map[string][]time.Duration)
	}
	t.by[kind] = append(t.by[kind], d)
}

func (t *opTimings) snapshot() map[string][]time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string][]time.Duration, len(t.by))
	for k, v := range t.by {
		out[k] = slices.Clone(v)
	}
	return out
}
