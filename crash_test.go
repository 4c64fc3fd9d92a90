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
	"github.com/execstore/execstore/server"
)

// engine is a small engine runtime over a store: handlers take delivered events, LoadForEvent,
// skip what is processed, and commit the next event of a chain; a relay delivers the outbox.
// The commit that creates version v of execution s emits the event "s/v" (while v < maxVersion),
// so what was emitted can be read off the final versions.
//
// What must always hold: an outbox entry is acknowledged only after the handler it was delivered
// to returned nil, and a timer is deleted only after the sweep fired it. A process that dies
// then loses nothing it acknowledged: an entry delivered but not yet handled is still in the
// outbox for the next life, and the handlers' dedupe skips what was handled but not yet acked.
// The relay keeps the entries it delivered and has not acked in a set of its own, so that a scan
// does not hand an entry to a handler again while one is still working on it.
type engine struct {
	store *aio.Store
	// relay, when set, is the store the relay and the sweep use (another process's); by
	// default they share store with the handlers.
	relay *aio.Store
	// handlers, when set, are the stores the handlers use in turn (processes of their own);
	// by default every handler uses store.
	handlers   []*aio.Store
	executions int
	maxVersion int64
	// retry makes handlers, the relay and the sweep retry any failed call after a pause, as
	// a runtime that rides out network faults does; otherwise a failure ends the run.
	retry  bool
	events chan delivery
	busy   atomic.Int64  // deliveries taken by a handler and not yet handled
	wake   chan struct{} // a handler finished a delivery: the relay has an ack to send

	mu    sync.Mutex
	acked map[string]int64   // the last acknowledged version of each execution
	fired map[string]float64 // the latest fire time of each execution's timer the sweep fired
	// wins counts the commits acknowledged at each version of each execution ("id/v").
	wins map[string]int
	// handled holds the deliveries whose handler returned nil and that the relay has not taken
	// yet to ack.
	handled []delivery
	// handledSeqs holds the outbox entries a handler returned nil for; ackedEarly counts the
	// acks sent for an entry no handler had handled yet.
	handledSeqs map[int64]bool
	ackedEarly  int
	// ackedSeqs holds the outbox entries whose ack the store acknowledged; relayedAgain
	// counts those the relay was handed again afterwards.
	ackedSeqs    map[int64]bool
	relayedAgain int
}

// delivery is one outbox entry handed to a handler.
type delivery struct {
	source string // the execution whose outbox holds the entry…
	seq    int64  // …and its seq there
	target string
	event  string
}

func newEngine(store *aio.Store, executions int, maxVersion int64) *engine {
	return &engine{store: store, executions: executions, maxVersion: maxVersion,
		acked: map[string]int64{}, fired: map[string]float64{}, wins: map[string]int{},
		handledSeqs: map[int64]bool{}, ackedSeqs: map[int64]bool{}}
}

// pause waits a little before a retry; it reports false when ctx ended.
func pause(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(10 * time.Millisecond):
		return true
	}
}

func (g *engine) target(source string, version int64) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(source, "x"))
	return fmt.Sprintf("x%d", (n*7+int(version)*3+1)%g.executions)
}

// handle processes one delivery; a store error ends the handler (the store was killed).
func (g *engine) handle(ctx context.Context, store *aio.Store, target, event string) error {
	for {
		exe, done, err := store.LoadForEvent(ctx, target, event)
		if err != nil {
			if g.retry && pause(ctx) {
				continue
			}
			return err
		}
		if done {
			return nil
		}
		// Every commit re-arms the execution's timer, to fire at its new version number: due at
		// once for the sweep (which runs with a far-off now), so the last one must be fired.
		c := execstore.Commit{ProcessedEventID: event,
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("wake", float64(exe.Version+1))}}
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
		case g.retry && pause(ctx):
			continue
		default:
			return err
		}
	}
}

// finished hands d, whose handler returned nil, to the relay to ack.
func (g *engine) finished(d delivery) {
	g.mu.Lock()
	g.handledSeqs[d.seq] = true
	g.handled = append(g.handled, d)
	g.mu.Unlock()
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// ackHandled acks every delivery whose handler returned nil since the last call, all at once
// (the store coalesces concurrent acks), and takes them out of inFlight. An entry whose ack
// failed is delivered again by a later scan, the dedupe skips it, and it is acked then. It
// returns the first error.
func (g *engine) ackHandled(ctx context.Context, relay *aio.Store, inFlight map[int64]bool) error {
	g.mu.Lock()
	batch := g.handled
	g.handled = nil
	g.mu.Unlock()
	errs := make([]error, len(batch))
	var wg sync.WaitGroup
	for i, d := range batch {
		wg.Go(func() { errs[i] = g.ack(ctx, relay, d) })
	}
	wg.Wait()
	for _, d := range batch {
		delete(inFlight, d.seq)
	}
	return errors.Join(errs...)
}

// ack acks the entry of d, and records it once the store acknowledged it.
func (g *engine) ack(ctx context.Context, relay *aio.Store, d delivery) error {
	g.mu.Lock()
	if !g.handledSeqs[d.seq] {
		g.ackedEarly++
	}
	g.mu.Unlock()
	if err := relay.AckOutbox(ctx, d.source, d.seq); err != nil {
		return err
	}
	g.mu.Lock()
	g.ackedSeqs[d.seq] = true
	g.mu.Unlock()
	return nil
}

// run delivers and handles until the outbox stays empty, or the store fails.
func (g *engine) run(ctx context.Context, handlers int) error {
	errs := make(chan error, handlers+1)
	var wg sync.WaitGroup
	g.events = make(chan delivery, 1024)
	g.wake = make(chan struct{}, 1)
	for i := range handlers {
		store := g.store
		if len(g.handlers) > 0 {
			store = g.handlers[i%len(g.handlers)]
		}
		wg.Go(func() {
			for d := range g.events {
				err := g.handle(ctx, store, d.target, d.event)
				if err == nil {
					g.finished(d)
				}
				g.busy.Add(-1)
				if err != nil {
					errs <- err
					for range g.events {
						g.busy.Add(-1)
					}
					return
				}
			}
		})
	}
	relay := g.relay
	if relay == nil {
		relay = g.store
	}
	// inFlight holds the entries delivered and not yet acked: a scan returns them until
	// they are, and they are not delivered again meanwhile.
	inFlight := map[int64]bool{}
	// failed reports whether err ends the run; with retry a failed step is done again.
	failed := func(err error) bool { return err != nil && (!g.retry || !pause(ctx)) }
	var relayErr error
	for idle := 0; idle < 5; {
		pending, err := relay.PendingOutbox(ctx, 200)
		if failed(err) {
			relayErr = err
			break
		} else if err != nil {
			continue
		}
		g.mu.Lock()
		for _, p := range pending {
			if g.ackedSeqs[p.Seq] {
				g.relayedAgain++
			}
		}
		g.mu.Unlock()
		delivered := 0
		for _, p := range pending {
			if inFlight[p.Seq] {
				continue // a handler has it, or its ack is on the way
			}
			inFlight[p.Seq] = true
			g.busy.Add(1)
			g.events <- delivery{source: p.SourceID, seq: p.Seq, target: p.TargetID, event: string(p.Event)}
			delivered++
		}
		// The handlers work on what was just delivered while the relay acks what they
		// finished and sweeps the timers.
		if err := g.ackHandled(ctx, relay, inFlight); failed(err) {
			relayErr = err
			break
		} else if err != nil {
			continue
		}
		due, err := relay.DueTimers(ctx, 1e9, 200)
		if failed(err) {
			relayErr = err
			break
		} else if err != nil {
			continue
		}
		g.mu.Lock()
		for _, d := range due {
			g.fired[d.ExecutionID] = max(g.fired[d.ExecutionID], d.FireAt) // fired before deleted: at least once
		}
		g.mu.Unlock()
		if err := relay.DeleteTimers(ctx, due); failed(err) {
			relayErr = err
			break
		} else if err != nil {
			continue
		}
		select {
		case relayErr = <-errs:
		default:
		}
		if relayErr != nil {
			break
		}
		switch {
		case len(pending) == 0 && len(due) == 0:
			if g.busy.Load() == 0 { // nothing delivered is still being handled
				idle++
			}
			time.Sleep(20 * time.Millisecond)
		case delivered == 0 && len(due) == 0:
			// Everything pending is with the handlers: wait for one to finish.
			idle = 0
			select {
			case <-g.wake:
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
			}
		default:
			idle = 0
		}
	}
	close(g.events)
	wg.Wait()
	return relayErr
}

// longRuns reports whether EXECSTORE_LONG=1 asks for the long crash and overload runs.
func longRuns() bool { return os.Getenv("EXECSTORE_LONG") == "1" }

// The store is killed mid-run (closed without draining), reopened, and the runtime recovers
// by relaying the outbox and sweeping due timers again: every emitted event is processed
// exactly once, every execution's last timer is fired, and no execution is behind its last
// acknowledged commit. The kill comes while many delivered entries wait for a handler (the
// first life's handlers reach the server through a proxy that delays their requests): a relay
// that acked an entry before its handler had handled it would lose those. With the snapshot
// cache off and on.
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

	// First life: the relay and the sweep on one store, the handlers on another behind the
	// delay proxy; killed without draining.
	first, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: h.opts.Database}, CacheSize: cacheSize})
	require.NoError(t, err)
	slowURI := delayedURI(t, srv.URI, handlerDelay)
	slow, err := aio.Open(bg, slowURI, aio.Options{Connection: server.Connection{Database: h.opts.Database}, CacheSize: cacheSize})
	require.NoError(t, err)
	g.store, g.handlers = first, []*aio.Store{slow}
	done := make(chan error, 1)
	go func() { done <- g.run(bg, 6) }()
	g.awaitPoint(t, executions/2, executions/2)
	killed, cancel := context.WithCancel(bg)
	cancel()
	_ = first.Close(killed) // gives up at once: in-flight work is cut off
	_ = slow.Close(killed)
	require.Error(t, <-done, "the first life should have been cut short")
	g.handlers = nil

	// Second life: a new store on the same database recovers by relaying what is pending.
	second, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: h.opts.Database}, CacheSize: cacheSize})
	require.NoError(t, err)
	defer second.Close(bg)
	g.store = second
	require.NoError(t, g.run(bg, 6))

	processed := g.verify(t, h.db, second)
	st := second.Stats()
	t.Logf("%d executions, %d events processed exactly once across a crash (cache: %d hits, %d misses, %d refused as processed)",
		executions, processed, st.CacheHits, st.CacheMisses, st.AlreadyProcessed)
	if cacheSize > 0 {
		assert.Positive(t, st.CacheHits, "the second life's handlers should have been answered from the cache")
	}
}

// awaitPoint waits for a moment of a run for a test to act on, such as killing a life of the
// engine: at least commits versions committed (acknowledged) in the run, and at least waiting
// delivered entries not handled yet — all of which an engine that acked on delivery would have
// acked already. It logs where handling and acks stand.
func (g *engine) awaitPoint(t *testing.T, commits, waiting int) {
	t.Helper()
	var busy int64
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		busy = g.busy.Load()
		return len(g.wins) >= commits && busy >= int64(waiting)
	}, time.Minute, time.Millisecond, "never %d commits with %d deliveries waiting for a handler", commits, waiting)
	g.mu.Lock()
	defer g.mu.Unlock()
	t.Logf("%d versions committed, %d deliveries not handled yet, %d entries handled, %d acked",
		len(g.wins), busy, len(g.handledSeqs), len(g.ackedSeqs))
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
// commit, no version was acknowledged to two commits, no acknowledged ack came back, no entry
// was acked before a handler had handled it, every execution's last timer fired, and nothing
// is left pending. It returns how many events were processed.
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
	due, err := store.DueTimers(bg, 1e9, 0)
	require.NoError(t, err)
	assert.Empty(t, due, "timers left after recovery")
	pending, err := store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	for v, n := range g.wins {
		assert.Equal(t, 1, n, "version %s acknowledged to %d commits", v, n)
	}
	assert.Zero(t, g.relayedAgain, "outbox entries handed to the relay again after their ack was acknowledged")
	assert.Zero(t, g.ackedEarly, "outbox entries acked before a handler had handled them")
	return len(processed)
}
