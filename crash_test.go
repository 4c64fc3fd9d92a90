package execstore_test

import (
	"context"
	"errors"
	"fmt"
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

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
)

// engine is a small engine runtime over a store: handlers take delivered events, LoadForEvent,
// skip what is processed, and commit the next event of a chain; a relay delivers the outbox.
// The commit that creates version v of execution s emits the event "s/v" (while v < maxVersion),
// so what was emitted can be read off the final versions.
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
	events chan string  // "target|event"
	busy   atomic.Int64 // deliveries taken by a handler and not yet handled

	mu    sync.Mutex
	acked map[string]int64   // the last acknowledged version of each execution
	fired map[string]float64 // the latest fire time of each execution's timer the sweep fired
	// wins counts the commits acknowledged at each version of each execution ("id/v").
	wins map[string]int
	// ackedSeqs holds the outbox entries whose ack the store acknowledged; relayedAgain
	// counts those the relay was handed again afterwards.
	ackedSeqs    map[int64]bool
	relayedAgain int
}

func newEngine(store *aio.Store, executions int, maxVersion int64) *engine {
	return &engine{store: store, executions: executions, maxVersion: maxVersion,
		acked: map[string]int64{}, fired: map[string]float64{}, wins: map[string]int{}, ackedSeqs: map[int64]bool{}}
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

// run delivers and handles until the outbox stays empty, or the store fails.
func (g *engine) run(ctx context.Context, handlers int) error {
	errs := make(chan error, handlers+1)
	var wg sync.WaitGroup
	g.events = make(chan string, 1024)
	for i := range handlers {
		store := g.store
		if len(g.handlers) > 0 {
			store = g.handlers[i%len(g.handlers)]
		}
		wg.Go(func() {
			for d := range g.events {
				target, event, _ := strings.Cut(d, "|")
				err := g.handle(ctx, store, target, event)
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
	// failed reports whether err ends the run; with retry a failed step is done again.
	failed := func(err error) bool { return err != nil && (!g.retry || !pause(ctx)) }
	var relayErr error
	for idle := 0; idle < 5; {
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
		pending, err := relay.PendingOutbox(ctx, 200)
		if failed(err) {
			relayErr = err
			break
		} else if err != nil {
			continue
		}
		if len(pending) == 0 && len(due) == 0 {
			if g.busy.Load() == 0 { // nothing delivered is still being handled
				idle++
			}
			time.Sleep(20 * time.Millisecond)
			continue
		}
		idle = 0
		g.mu.Lock()
		for _, p := range pending {
			if g.ackedSeqs[p.Seq] {
				g.relayedAgain++
			}
		}
		g.mu.Unlock()
		for _, p := range pending {
			g.busy.Add(1)
			g.events <- p.TargetID + "|" + string(p.Event) // delivered before acked: at least once
		}
		for _, p := range pending {
			err := relay.AckOutbox(ctx, p.SourceID, p.Seq)
			if err == nil {
				g.mu.Lock()
				g.ackedSeqs[p.Seq] = true
				g.mu.Unlock()
			}
			if failed(err) {
				relayErr = err
				break
			}
			// An ack that failed is retried when the entry is read again.
		}
		if relayErr != nil {
			break
		}
		select {
		case err := <-errs:
			relayErr = err
		default:
		}
		if relayErr != nil {
			break
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
// acknowledged commit. With the snapshot cache off and on.
func TestCrashAndRecover(t *testing.T) {
	for _, cache := range []int{0, testCacheSize} {
		t.Run(fmt.Sprintf("cache=%d", cache), func(t *testing.T) { testCrashAndRecover(t, cache) })
	}
}

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

	// First life: killed after a while, without draining.
	first, err := aio.Open(bg, server.URI, aio.Options{Database: h.opts.Database, CacheSize: cacheSize})
	require.NoError(t, err)
	g.store = first
	done := make(chan error, 1)
	go func() { done <- g.run(bg, 6) }()
	require.Eventually(t, func() bool { // some progress, far from the end
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.acked) >= executions/2
	}, 30*time.Second, 5*time.Millisecond)
	killed, cancel := context.WithCancel(bg)
	cancel()
	_ = first.Close(killed) // gives up at once: in-flight work is cut off
	require.Error(t, <-done, "the first life should have been cut short")

	// Second life: a new store on the same database recovers by relaying what is pending.
	second, err := aio.Open(bg, server.URI, aio.Options{Database: h.opts.Database, CacheSize: cacheSize})
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

// verify checks a finished run against the stored executions: every emitted event was
// processed exactly once and nothing else was, no execution is behind its last acknowledged
// commit, no version was acknowledged to two commits, no acknowledged ack came back, every
// execution's last timer fired, and nothing is left pending. It returns how many events
// were processed.
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
	assert.Len(t, processed, len(emitted), "an event was processed that nobody emitted")
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
	return len(processed)
}
