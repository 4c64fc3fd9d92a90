package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/relay"
	"github.com/execstore/execstore/server"
)

// engine is a small engine runtime over a store: a relay.Relay hands the outbox entries to its
// handler, which takes the delivered event, LoadForEvent, skips what is processed, and commits
// the next event of a chain; a relay.Sweeper fires the timers. The commit that creates version
// v of execution s emits the event "s/v" (while v < maxVersion), so what was emitted can be
// read off the final versions.
//
// Each run of the runtime is a life: a process, from its start to its end or its death (kill).
// What must always hold, and what the engine records for verify to check:
//   - At least once: an outbox entry is acked only after a handler of the same life returned
//     nil for it, and a timer is deleted only after the sweeper's handler of the same life
//     fired it. A process that dies then loses nothing it acknowledged: an entry delivered but
//     not yet handled is still in the outbox for the next life, and the handlers' dedupe skips
//     what was handled but not yet acked. The relay and the sweeper reach the store through a
//     watchedStore, which records every ack and timer deletion they send that no handler had
//     earned.
//   - An acknowledged ack holds: no scan sent after the store acknowledged an entry's ack
//     returns the entry, and no handler is handed it again, in that life or a later one.
//   - Every failure is explained: one of a handler, a scan or an ack, reported to
//     Options.OnError, is retried by the relay when the run suffers injected faults (faults);
//     otherwise, or when it is one no fault explains, it ends the run (see failure).
type engine struct {
	store *aio.Store
	// relay, when set, is the store the relay and the sweeper use (another process's); by
	// default they share store with the handlers.
	relay *aio.Store
	// handlers, when set, are the stores the handler calls use in turn (processes of their
	// own); by default every call uses store.
	handlers   []*aio.Store
	executions int
	maxVersion int64
	// faults says the run suffers injected faults (connection resets, latency, a server
	// restart): the failures they cause to handlers, scans and acks are expected, and the relay
	// and the sweeper retry them. Without it, any failure while a life lives ends the run.
	faults bool

	mu   sync.Mutex
	life *life // the life running now, or the last one
	// failures counts the failures reported while a life lived, by operation.
	failures map[relay.Op]int
	acked    map[string]int64 // the last acknowledged version of each execution
	fired    map[string]int64 // the latest fire time (in Unix seconds) of each execution's timer the sweep fired
	// wins counts the commits acknowledged at each version of each execution ("id/v").
	wins map[string]int
	// ackedAt holds the entries whose ack the store acknowledged, each with the number of
	// acks acknowledged before it: its place in their order.
	ackedAt map[entryKey]int
	// ackedEarly counts the acks sent for an entry no handler of the relay's life had
	// returned nil for; deletedEarly the timers deleted that the sweeper's handler of its life
	// had not fired.
	ackedEarly, deletedEarly int
	// returnedAgain counts the entries a scan returned although their ack was acknowledged
	// before the scan was sent; relayedAgain those handed to a handler after their ack was
	// acknowledged.
	returnedAgain, relayedAgain int
}

// life is one run of the engine's runtime (see engine.run): a process of its own.
type life struct {
	handlers []*aio.Store // the stores the handler calls use in turn
	relay    *relay.Relay
	sweeper  *relay.Sweeper
	// dead is set by a kill: from then on the life's handlers hand nothing back.
	dead     atomic.Bool
	calls    atomic.Int64 // handler calls: they take handlers in turn
	handledN atomic.Int64 // handler calls that returned nil
	// over is closed when the life's run has returned, with err.
	over chan struct{}
	err  error

	// Under engine.mu:
	handled map[entryKey]bool // the entries a handler returned nil for
	fired   map[timerKey]bool // the timers the sweeper's handler fired
}

// entryKey names an outbox entry: the execution whose outbox holds it, and its seq there.
type entryKey struct {
	source string
	seq    int64
}

// timerKey names a due timer as the sweeper is handed it.
type timerKey struct {
	execution, path string
	fireAt          int64 // Unix nanoseconds
}

func newEngine(store *aio.Store, executions int, maxVersion int64) *engine {
	return &engine{store: store, executions: executions, maxVersion: maxVersion,
		failures: map[relay.Op]int{}, acked: map[string]int64{}, fired: map[string]int64{},
		wins: map[string]int{}, ackedAt: map[entryKey]int{}}
}

// How every life runs its relay and its sweeper.
const (
	// engineLanes is the relay's and the sweeper's lanes: at most that many handler calls
	// at once, each execution's items one at a time.
	engineLanes = 12
	// relayPoll is how often they scan when no commit wakes them: every commit of these tests
	// is made through a store of this process, on the same database, and wakes them.
	relayPoll = 250 * time.Millisecond
	// relayGap and sweepGap are the least time between the starts of their scans
	// (Options.ScanGap): a scan gathers what the commits of a gap wrote, in fewer commands to
	// the server the handlers share with them. A timer then fires up to sweepGap late.
	relayGap = 50 * time.Millisecond
	sweepGap = 200 * time.Millisecond
	// relayRetryMin and relayRetryMax bound their back-off after a failure: of a handler (its
	// execution's entries wait), a scan or an ack.
	relayRetryMin = 5 * time.Millisecond
	relayRetryMax = 100 * time.Millisecond
	// drainCheck is how often a run looks whether its relay and sweeper are idle, and
	// drainLook how often, at most, it then looks whether the outbox and the due timers are
	// empty.
	drainCheck = 5 * time.Millisecond
	drainLook  = 50 * time.Millisecond
)

// sweepNow is the sweeper's clock, far past every fire time the engine arms (its timers fire
// at version numbers, in seconds since the Unix epoch): every timer is due at once.
var sweepNow = time.Unix(1e9, 0)

// errKilled is the cause the tests kill a life with.
var errKilled = errors.New("the process was killed")

// errViolation marks a handler's failure no fault can explain: it always ends the run.
var errViolation = errors.New("violation")

func (g *engine) target(source string, version int64) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(source, "x"))
	return fmt.Sprintf("x%d", (n*7+int(version)*3+1)%g.executions)
}

// handle processes one delivery on store; a failure is returned, for the relay to retry.
func (g *engine) handle(ctx context.Context, store *aio.Store, target, event string) error {
	for {
		exe, done, err := store.LoadForEvent(ctx, target, event)
		if err != nil {
			return err
		}
		if exe == nil {
			return fmt.Errorf("%w: event %s delivered to %s, which does not exist", errViolation, event, target)
		}
		if done {
			return nil
		}
		// Every commit re-arms the execution's timer, to fire at its new version number: due at
		// once for the sweeper (whose clock is far ahead), so the last one must be fired.
		c := execstore.Commit{ProcessedEventID: event,
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("wake", time.Unix(exe.Version+1, 0))}}
		if next := exe.Version + 1; next < g.maxVersion {
			c.Emits = []execstore.Emit{{TargetID: g.target(exe.ID, next), Event: []byte(fmt.Sprintf("%s/%d", exe.ID, next))}}
		}
		_, err = store.Commit(ctx, exe, c)
		switch {
		case err == nil:
			g.mu.Lock()
			g.acked[exe.ID] = max(g.acked[exe.ID], exe.Version)
			g.wins[fmt.Sprintf("%s/%d", exe.ID, exe.Version)]++
			g.mu.Unlock()
			return nil
		case errors.Is(err, execstore.ErrAlreadyProcessed):
			return nil // a LoadForEvent answered from the cache did not know it: the commit did
		case errors.Is(err, execstore.ErrConflict), errors.Is(err, execstore.ErrOutcomeUnknown):
			continue // reload and look again
		default:
			return err
		}
	}
}

// deliver is the relay's handler of life l: it handles the entry's event and returns nil, for
// the relay to ack the entry, or the failure, for the relay to deliver it again later. Once
// the life is dead it returns relay.ErrLeavePending, whatever the handling did: the process
// is gone before it could hand anything back, and the entry is still pending for the next life.
func (g *engine) deliver(ctx context.Context, l *life, e execstore.OutboxEntry) error {
	k := entryKey{e.SourceID, e.Seq}
	g.mu.Lock()
	if _, ok := g.ackedAt[k]; ok {
		g.relayedAgain++
	}
	g.mu.Unlock()
	if l.dead.Load() {
		return relay.ErrLeavePending
	}
	store := l.handlers[int(l.calls.Add(1)-1)%len(l.handlers)]
	err := g.handle(ctx, store, e.TargetID, string(e.Event))
	if l.dead.Load() {
		return relay.ErrLeavePending // died while handling: nothing is handed back
	}
	if err != nil {
		return err
	}
	g.mu.Lock()
	l.handled[k] = true
	g.mu.Unlock()
	l.handledN.Add(1)
	return nil
}

// fire is the sweeper's handler of life l: it records the timer as fired (before the sweeper
// deletes it: at least once), or leaves it pending once the life is dead.
func (g *engine) fire(l *life, d execstore.DueTimer) error {
	if l.dead.Load() {
		return relay.ErrLeavePending
	}
	g.mu.Lock()
	g.fired[d.ExecutionID] = max(g.fired[d.ExecutionID], d.FireAt.Unix())
	l.fired[timerKey{d.ExecutionID, d.Path, d.FireAt.UnixNano()}] = true
	g.mu.Unlock()
	return nil
}

// failure is the OnError of life l's relay and sweeper: it counts err, and returns it as the
// cause to end the run with when nothing explains it. Once the life is dead, everything fails
// (its stores are closed, its context is cancelled): that is its death, not a failure. Under
// injected faults, failures are expected and retried, but not a closed store or invalid
// input, nor a handler finding what must not be (errViolation).
func (g *engine) failure(l *life, err error) error {
	if l.dead.Load() {
		return nil
	}
	op := relay.Op("?")
	if re := (*relay.Error)(nil); errors.As(err, &re) {
		op = re.Op
	}
	g.mu.Lock()
	g.failures[op]++
	g.mu.Unlock()
	if g.faults && !errors.Is(err, errViolation) && !errors.Is(err, execstore.ErrClosed) &&
		!errors.Is(err, execstore.ErrInvalid) {
		return nil
	}
	return fmt.Errorf("unexpected failure: %w", err)
}

// run runs a life of the runtime: a relay.Relay with lanes lanes (at most that many handler
// calls at once, one execution's entries one at a time) and a relay.Sweeper, both on the relay
// store, until the outbox and the due timers are empty; then it closes them, cleanly. It
// returns nil then, or else why the life ended first: ctx's cause (a kill), the first
// failure nothing explains (see failure), the relay's or the sweeper's own error.
func (g *engine) run(ctx context.Context, lanes int) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	l := &life{handlers: g.handlers, over: make(chan struct{}),
		handled: map[entryKey]bool{}, fired: map[timerKey]bool{}}
	if len(l.handlers) == 0 {
		l.handlers = []*aio.Store{g.store}
	}
	relayStore := g.relay
	if relayStore == nil {
		relayStore = g.store
	}
	ws := g.watch(l, relayStore)
	defer ws.release()
	opts := relay.Options{ScanGap: relayGap, Lanes: lanes, PollInterval: relayPoll, RetryMin: relayRetryMin, RetryMax: relayRetryMax,
		OnError: func(err error) {
			if cause := g.failure(l, err); cause != nil {
				cancel(cause)
			}
		}}
	l.relay = relay.New(ws, func(ctx context.Context, e execstore.OutboxEntry) error { return g.deliver(ctx, l, e) }, opts)
	sweepOpts := opts
	sweepOpts.Clock = func() time.Time { return sweepNow }
	sweepOpts.ScanGap = sweepGap
	l.sweeper = relay.NewSweeper(ws, func(_ context.Context, d execstore.DueTimer) error { return g.fire(l, d) }, sweepOpts)
	g.mu.Lock()
	g.life = l
	g.mu.Unlock()

	ran := make(chan error, 2)
	for _, r := range []interface{ Run(context.Context) error }{l.relay, l.sweeper} {
		go func() {
			err := r.Run(ctx)
			if err != nil {
				cancel(err) // it cannot go on: the life ends
			}
			ran <- err
		}()
	}
	errs := []error{awaitDrained(ctx, relayStore, l)}
	// Drained: Close waits for the handlers in flight and acks what they finished. Killed or
	// failed: Run has stopped, or stops, by itself.
	closeCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer stop()
	errs = append(errs, l.relay.Close(closeCtx), l.sweeper.Close(closeCtx), <-ran, <-ran)
	if errs[0] == nil {
		errs = append(errs, context.Cause(ctx)) // a failure while closing
	}
	var err error
	for _, e := range errs {
		if e != nil && !errors.Is(err, e) { // Run also returns a cause the run was cancelled with
			err = errors.Join(err, e)
		}
	}
	l.err = err
	close(l.over)
	return err
}

// awaitDrained returns nil once store holds no outbox entry and no due timer, or ctx's cause
// when ctx ends first. A handler commits the next entry of its chain before its entry is
// acked, so an outbox found empty stays empty: every commit is made, every timer armed, and a
// later look at the timers that finds none due finds every one fired and deleted. The store
// is looked at only while l's relay and sweeper hold nothing (an entry or a timer they hold
// is still in the store), and at most every drainLook.
func awaitDrained(ctx context.Context, store execstore.Store, l *life) error {
	tick := time.NewTicker(drainCheck)
	defer tick.Stop()
	var looked time.Time
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
		if l.relay.Stats().InFlight > 0 || l.sweeper.Stats().InFlight > 0 || time.Since(looked) < drainLook {
			continue
		}
		looked = time.Now()
		if pending, err := store.PendingOutbox(ctx, 1); err != nil || len(pending) > 0 {
			continue // a look that failed (under faults) is made again
		}
		if due, err := store.DueTimers(ctx, sweepNow, 1); err == nil && len(due) == 0 {
			return nil
		}
	}
}

// kill kills the life running now as a process dies mid-run: its handlers hand nothing back
// from now on (the entries they hold stay pending), cancel (of the context it runs in) stops
// its relay and sweeper and cancels their handlers, and its stores are closed without
// draining (the work in flight is cut off: a commit may or may not land, an ack may or may
// not).
func (g *engine) kill(cancel context.CancelCauseFunc, stores ...*aio.Store) {
	g.mu.Lock()
	l := g.life
	g.mu.Unlock()
	l.dead.Store(true)
	cancel(errKilled)
	killed, cancelKilled := context.WithCancel(bg)
	cancelKilled()
	for _, s := range stores {
		_ = s.Close(killed) // gives up at once: in-flight work is cut off
	}
}

// waiting is how many entries life l's relay has handed to its lanes that no handler has
// finished with yet, queued in a lane or in a handler call: those it holds but the ones a
// handler returned nil for, which await their ack.
func (l *life) waiting() int64 {
	st := l.relay.Stats()
	return st.InFlight - (l.handledN.Load() - st.Acked)
}

// report says what the last life's relay and sweeper did, and which failures the lives
// retried.
func (g *engine) report() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	r, s := g.life.relay.Stats(), g.life.sweeper.Stats()
	return fmt.Sprintf("last life: relay delivered %d, acked %d, skipped %d, withheld %d; sweeper fired %d, deleted %d; failures retried: %v",
		r.Delivered, r.Acked, r.Skipped, r.Withheld, s.Delivered, s.Acked, g.failures)
}

// watchedStore is the store a life's relay and sweeper use: the relay store, with the acks,
// the timer deletions and the scans they send checked against what must always hold (see
// engine). It wakes them as the store it wraps does.
type watchedStore struct {
	execstore.Store
	g *engine
	l *life
}

func (g *engine) watch(l *life, s execstore.Store) *watchedStore {
	w := &watchedStore{Store: s, g: g, l: l}
	if sig := wake.Of(s); sig != nil {
		wake.Register(w, sig)
	}
	return w
}

// release stops the store's wake-ups.
func (w *watchedStore) release() { wake.Unregister(w) }

func (w *watchedStore) PendingOutbox(ctx context.Context, limit int) ([]execstore.OutboxEntry, error) {
	w.g.mu.Lock()
	before := len(w.g.ackedAt) // the acks acknowledged before the scan is sent
	w.g.mu.Unlock()
	entries, err := w.Store.PendingOutbox(ctx, limit)
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	for _, e := range entries {
		if n, ok := w.g.ackedAt[entryKey{e.SourceID, e.Seq}]; ok && n < before {
			w.g.returnedAgain++
		}
	}
	return entries, err
}

func (w *watchedStore) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	k := entryKey{sourceID, seq}
	w.g.mu.Lock()
	if !w.l.handled[k] {
		w.g.ackedEarly++
	}
	w.g.mu.Unlock()
	if err := w.Store.AckOutbox(ctx, sourceID, seq); err != nil {
		return err
	}
	w.g.mu.Lock()
	if _, ok := w.g.ackedAt[k]; !ok {
		w.g.ackedAt[k] = len(w.g.ackedAt)
	}
	w.g.mu.Unlock()
	return nil
}

func (w *watchedStore) DeleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	w.g.mu.Lock()
	for _, d := range timers {
		if !w.l.fired[timerKey{d.ExecutionID, d.Path, d.FireAt.UnixNano()}] {
			w.g.deletedEarly++
		}
	}
	w.g.mu.Unlock()
	return w.Store.DeleteTimers(ctx, timers)
}

func (w *watchedStore) DeleteTimer(ctx context.Context, id, path string, fireAt time.Time) (bool, error) {
	w.g.mu.Lock()
	if !w.l.fired[timerKey{id, path, fireAt.UnixNano()}] {
		w.g.deletedEarly++
	}
	w.g.mu.Unlock()
	return w.Store.DeleteTimer(ctx, id, path, fireAt)
}

// longRuns reports whether EXECSTORE_LONG=1 asks for the long crash and overload runs.
func longRuns() bool { return os.Getenv("EXECSTORE_LONG") == "1" }

// The store is killed mid-run (the process dies: its relay store and handler store are closed
// without draining, its relay and sweeper stopped, its handlers hand nothing more back),
// reopened, and the runtime recovers by relaying the outbox and sweeping due timers again:
// every emitted event is processed exactly once, every execution's last timer is fired, no
// execution is behind its last acknowledged commit, no entry is acked before a handler
// returned nil for it and no timer deleted before it fired, and no acknowledged ack comes
// back. The kill comes while many delivered entries wait for a handler (the first life's
// handlers reach the server through a proxy that delays their requests, and the relay
// delivers far ahead of them): a relay that acked an entry before its handler had handled it
// would lose those. Neither life suffers a fault other than the kill: any failure while the
// process lives fails the test. With the snapshot cache off and on.
func TestCrashAndRecover(t *testing.T) {
	for _, cache := range []int{0, testCacheSize} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) { testCrashAndRecover(t, cache) })
	}
}

// handlerDelay is what the delay proxy adds to each request of the handlers it serves: a load
// and a commit then cost far more than an ack, as on a server or a network where the relay's
// writes are the cheap ones.
const handlerDelay = 15 * time.Millisecond

func testCrashAndRecover(t *testing.T, cacheSize int) {
	h := newHarness(t, aio.Options{})
	executions, maxVersion := 24, int64(10)
	if longRuns() {
		executions, maxVersion = 200, 40
	}
	g := newEngine(h.store, executions, maxVersion)
	for i := range executions {
		id := fmt.Sprintf("x%d", i)
		_, err := h.store.Commit(bg, &execstore.Execution{ID: id, DefinitionID: "chain", Status: execstore.Running},
			execstore.Commit{Emits: []execstore.Emit{{TargetID: id, Event: []byte(id + "/start")}}})
		require.NoError(t, err)
	}
	runCtx, cancel := context.WithTimeout(bg, 3*time.Minute)
	defer cancel()

	// First life: the relay and the sweeper on one store, the handlers on another behind the
	// delay proxy; killed halfway, while deliveries wait for a handler.
	first, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: h.opts.Database}, CacheSize: cacheSize})
	require.NoError(t, err)
	slowURI := delayedURI(t, srv.URI, handlerDelay)
	slow, err := aio.Open(bg, slowURI, aio.Options{Connection: server.Connection{Database: h.opts.Database}, CacheSize: cacheSize})
	require.NoError(t, err)
	g.store, g.handlers = first, []*aio.Store{slow}
	firstCtx, kill := context.WithCancelCause(runCtx)
	defer kill(nil)
	done := make(chan error, 1)
	go func() { done <- g.run(firstCtx, engineLanes) }()
	g.awaitPoint(t, executions/2, executions/2)
	g.kill(kill, first, slow)
	require.ErrorIs(t, <-done, errKilled, "the first life should have been cut short by the kill, and by nothing else")
	g.handlers = nil

	// Second life: a new store on the same database recovers by relaying what is pending.
	second, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: h.opts.Database}, CacheSize: cacheSize})
	require.NoError(t, err)
	defer second.Close(bg)
	g.store = second
	require.NoError(t, g.run(runCtx, engineLanes))

	processed := g.verify(t, h.db, second)
	st := second.Stats()
	t.Logf("%d executions, %d events processed exactly once across a crash (cache: %d hits, %d misses, %d refused as processed); %s",
		executions, processed, st.CacheHits, st.CacheMisses, st.AlreadyProcessed, g.report())
	if cacheSize > 0 {
		assert.Positive(t, st.CacheHits, "the second life's handlers should have been answered from the cache")
	}
}

// awaitPoint waits for a moment of the life running now for a test to act on, such as killing
// it: at least commits versions committed (acknowledged) in the run, and at least waiting
// delivered entries not handled yet — all of which an engine that acked on delivery would have
// acked already. It fails the test if the life ends first. It logs where handling and acks
// stand.
func (g *engine) awaitPoint(t *testing.T, commits, waiting int) {
	t.Helper()
	var l *life
	var busy int64
	require.Eventually(t, func() bool {
		g.mu.Lock()
		l = g.life
		n := len(g.wins)
		g.mu.Unlock()
		if l == nil {
			return false
		}
		select {
		case <-l.over:
			return true
		default:
		}
		busy = l.waiting()
		return n >= commits && busy >= int64(waiting)
	}, time.Minute, time.Millisecond, "never %d commits with %d deliveries waiting for a handler", commits, waiting)
	select {
	case <-l.over:
		t.Fatalf("the run ended before %d commits with %d deliveries waiting for a handler: %v", commits, waiting, l.err)
	default:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	t.Logf("%d versions committed, %d deliveries not handled yet, %d entries handled, %d acked",
		len(g.wins), busy, l.handledN.Load(), l.relay.Stats().Acked)
}

// delayedURI starts a proxy in front of the server at uri that holds each request for delay
// before passing it on, and returns the URI that goes through it (a direct connection).
func delayedURI(t *testing.T, uri string, delay time.Duration) string {
	t.Helper()
	cs, err := connstring.Parse(uri)
	require.NoError(t, err)
	addr := newDelayProxy(t, cs.Hosts[0], delay).Addr()
	proxied := strings.Replace(uri, cs.Hosts[0], addr, 1)
	if strings.Contains(proxied, "?") {
		return proxied + "&directConnection=true"
	}
	return proxied + "?directConnection=true"
}

// newDelayProxy relays TCP connections to upstream and holds every chunk a client sends for
// delay before passing it on; the answers go back at once. The driver has one request in
// flight per connection, so each round trip through it takes delay longer.
func newDelayProxy(t *testing.T, upstream string, delay time.Duration) *testserver.Relay {
	r := testserver.NewRelay(t, "127.0.0.1:0", upstream)
	pipe := func(dst, src net.Conn, hold time.Duration, client, server net.Conn) {
		defer r.Reset(client, server)
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				time.Sleep(hold)
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	r.Start(func(client, server net.Conn) {
		r.Go(func() { pipe(client, server, 0, client, server) })
		pipe(server, client, delay, client, server)
	})
	return r
}

// verify checks a finished run against the stored executions: every emitted event was
// processed exactly once and nothing else was, no execution is behind its last acknowledged
// commit, no version was acknowledged to two commits, no acknowledged ack came back (to a
// scan or to a handler), no entry was acked before a handler had returned nil for it, no
// timer was deleted before it fired, every execution's last timer fired, and nothing is left
// pending. It returns how many events were processed.
func (g *engine) verify(t *testing.T, db *mongo.Database, store *aio.Store) int {
	t.Helper()
	// What was emitted: every execution's versions 2..final each emitted one event (below the
	// cap), plus the start events. What was processed: the dedupe sets.
	cur, err := db.Collection("executions").Find(bg, bson.D{{Key: "definition_id", Value: "chain"}})
	require.NoError(t, err)
	processed := map[string]int{}
	emitted := map[string]bool{}
	commits := 0
	finals := map[string]int64{}
	for cur.Next(bg) {
		id := cur.Current.Lookup("_id").StringValue()
		version := rawInt(t, cur.Current, "version")
		finals[id] = version
		commits += int(version - 1) // each commit after the create processed one event
		emitted[id+"/start"] = true
		for v := int64(2); v <= version && v < g.maxVersion; v++ {
			emitted[fmt.Sprintf("%s/%d", id, v)] = true
		}
		vals, err := cur.Current.Lookup("processed").Array().Values()
		require.NoError(t, err)
		for _, v := range vals {
			processed[v.StringValue()]++
		}
	}
	require.NoError(t, cur.Err())
	for ev := range emitted {
		assert.Equal(t, 1, processed[ev], "event %s processed %d times", ev, processed[ev])
	}
	assert.Equal(t, len(processed), commits, "a commit processed an event twice, or processed nothing")
	assert.Len(t, processed, len(emitted), "the events processed are not those emitted: one was lost, or one nobody emitted was processed")
	for id, v := range g.acked {
		assert.GreaterOrEqual(t, finals[id], v, "%s is behind its last acknowledged commit", id)
	}
	for id, v := range finals {
		if v >= 2 {
			assert.EqualValues(t, v, g.fired[id], "%s: its last timer (due at %d) was never fired", id, v)
		}
	}
	due, err := store.DueTimers(bg, sweepNow, 0)
	require.NoError(t, err)
	assert.Empty(t, due, "timers left after recovery")
	pending, err := store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	for v, n := range g.wins {
		assert.Equal(t, 1, n, "version %s acknowledged to %d commits", v, n)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	assert.Zero(t, g.returnedAgain, "outbox entries returned to a scan sent after their ack was acknowledged")
	assert.Zero(t, g.relayedAgain, "outbox entries handed to a handler again after their ack was acknowledged")
	assert.Zero(t, g.ackedEarly, "outbox entries acked before a handler had returned nil for them")
	assert.Zero(t, g.deletedEarly, "timers deleted before the sweeper's handler had fired them")
	return len(processed)
}
