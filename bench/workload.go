package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
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

// Streams of the per-event random sources, so that each choice about an event is the same
// whatever order the events are handled in.
const (
	streamHandle    = 1 // the handler's choices: emit target, timer op, timer delay
	streamRedeliver = 2 // the handler's choice to withhold the first ack
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
	// relayStore is the store the relay and the sweeper run on (package relay): a store of
	// its own, with a client of its own, as in a process of its own.
	relayStore() execstore.Store
	// final reads what the checks need: every execution of ids, in that order, the pending
	// outbox and the timers due by horizon.
	final(ctx context.Context, ids []string, horizon time.Time) (finalState, error)
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

	// The relay and sweeper of the run (see run), and the relay's store with its acks.
	relay   *relay.Relay
	sweeper *relay.Sweeper
	log     *ackLog
	// emitAt holds, for each event, when the commit that emitted it returned (Unix
	// nanoseconds; 0 for the start events, emitted before the window): the start of its
	// delivery latency.
	emitAt []atomic.Int64

	mu           sync.Mutex
	emitted      map[int]int      // event number → successful commits that emitted it
	processed    map[int]int      // event number → successful commits that processed it
	skippedEarly []string         // events called processed before any commit processed them
	maxFireAt    time.Time        // latest fire time ever armed
	delivered    map[entryKey]int // deliveries of each outbox entry

	timings opTimings // store calls as the workload sees them, by kind

	processedN  atomic.Int64 // distinct events processed
	commits     atomic.Int64
	traced      atomic.Int64
	conflicts   atomic.Int64
	duplicates  atomic.Int64 // deliveries skipped as already processed…
	refused     atomic.Int64 // …of which the commit's dedupe guard refused
	redelivered atomic.Int64
	reappeared  atomic.Int64
	armed       atomic.Int64
	cancelled   atomic.Int64
	fired       atomic.Int64 // due timers the sweeper handed to the workload's handler
}

func newEngine(cfg config, store execStore) *workload {
	w := &workload{
		cfg:       cfg,
		store:     store,
		ids:       executionIDs(cfg.executions),
		total:     cfg.events,
		emitAt:    make([]atomic.Int64, cfg.events),
		delivered: make(map[entryKey]int, cfg.events),
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

// acks returns the entries the relay acked after their handler returned nil.
func (w *workload) acks() int64 {
	if w.relay == nil {
		return 0
	}
	return w.relay.Stats().Acked
}

func (w *workload) counts() map[string]int64 {
	c := map[string]int64{
		"conflicts":          w.conflicts.Load(),
		"duplicates_skipped": w.duplicates.Load(),
		"refused_by_commit":  w.refused.Load(),
		"redelivered":        w.redelivered.Load(),
		"acks":               w.acks(),
		"timers_armed":       w.armed.Load(),
		"timers_cancelled":   w.cancelled.Load(),
		"timers_fired":       w.fired.Load(),
		"traced":             w.traced.Load(),
	}
	if w.relay != nil {
		st, sw := w.relay.Stats(), w.sweeper.Stats()
		c["relay_scans"], c["relay_wakeups"], c["relay_skipped"] = st.Scans, st.Wakeups, st.Skipped
		c["sweeper_scans"], c["timers_deleted"] = sw.Scans, sw.Acked
		c["relay_targeted"], c["sweeper_targeted"] = st.Targeted, sw.Targeted
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

// withholdAck reports whether the handler leaves the entry of event n pending after its first
// handling.
func (w *workload) withholdAck(n int) bool {
	return w.cfg.redeliver > 0 && eventRand(w.cfg.seed, n, streamRedeliver).Float64() < w.cfg.redeliver
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
	child  int       // the event emitted, or -1
	target string    // the execution it is addressed to
	fireAt time.Time // the timer armed, zero when the commit cancels it
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
		p.fireAt = time.Now().Add(delay).Round(0)
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
	if !p.fireAt.IsZero() {
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
	if p.fireAt.After(w.maxFireAt) {
		w.maxFireAt = p.fireAt
	}
	w.mu.Unlock()
	if first {
		w.processedN.Add(1)
	}
	if p.child >= 0 {
		w.emitAt[p.child].CompareAndSwap(0, time.Now().UnixNano())
	}
}

// finish waits until every timer ever armed is due and sweeps once more, so that none may be
// left.
func (w *workload) finish(ctx context.Context) error {
	w.mu.Lock()
	last := w.maxFireAt
	w.mu.Unlock()
	if wait := time.Until(last); wait > 0 {
		select {
		case <-time.After(wait + time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if now := time.Now().Round(0); now.After(last) {
		last = now
	}
	return w.sweepAll(ctx, last)
}

// parseEntry turns an outbox entry into a delivery, refusing one this run cannot have
// written.
func (w *workload) parseEntry(e execstore.OutboxEntry) (delivery, error) {
	n, err := parseEvent(e.Event)
	if err != nil {
		return delivery{}, fmt.Errorf("outbox entry %d of %s: %w", e.Seq, e.SourceID, err)
	}
	if _, ok := w.index[e.TargetID]; !ok || n >= w.total {
		return delivery{}, fmt.Errorf("outbox entry %d of %s is not one this run emitted: event %q to %q",
			e.Seq, e.SourceID, e.Event, e.TargetID)
	}
	return delivery{target: e.TargetID, id: string(e.Event), n: n}, nil
}

// eventID is event n's ID, which is also its outbox entry's payload (encodeEvent): the
// handler reads n back from it (parseEvent), as raw's handlers get it from memory, with no
// decoding to pay for that raw does not.
func eventID(n int) string { return fmt.Sprintf("ev-%07d", n) }

func encodeEvent(n int) []byte { return []byte(eventID(n)) }

// parseEvent returns the number of the event whose payload is b (encodeEvent).
func parseEvent(b []byte) (int, error) {
	digits, ok := bytes.CutPrefix(b, []byte("ev-"))
	n, err := strconv.Atoi(string(digits))
	if !ok || err != nil || n < 0 || string(b) != eventID(n) {
		return 0, fmt.Errorf("event %q is not one of the workload's", b)
	}
	return n, nil
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
