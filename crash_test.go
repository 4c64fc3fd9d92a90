package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
)

// engine is a small engine runtime over a store: handlers take delivered events, LoadForEvent,
// skip what is processed, and commit the next event of a chain; a relay delivers the outbox.
// The commit that creates version v of execution s emits the event "s/v" (while v < maxVersion),
// so what was emitted can be read off the final versions.
type engine struct {
	store      *aio.Store
	executions int
	maxVersion int64
	events     chan string // "target|event"

	mu    sync.Mutex
	acked map[string]int64   // the last acknowledged version of each execution
	fired map[string]float64 // the latest fire time of each execution's timer the sweep fired
}

func (g *engine) target(source string, version int64) string {
	n, _ := strconv.Atoi(strings.TrimPrefix(source, "x"))
	return fmt.Sprintf("x%d", (n*7+int(version)*3+1)%g.executions)
}

// handle processes one delivery; a store error ends the handler (the store was killed).
func (g *engine) handle(ctx context.Context, target, event string) error {
	for {
		exe, done, err := g.store.LoadForEvent(ctx, target, event)
		if err != nil {
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
		_, err = g.store.Commit(ctx, exe, c)
		switch {
		case err == nil:
			g.mu.Lock()
			g.acked[exe.ID] = max(g.acked[exe.ID], exe.Version)
			g.mu.Unlock()
			return nil
		case errors.Is(err, execstore.ErrConflict), errors.Is(err, execstore.ErrOutcomeUnknown):
			continue // reload and look again
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
	for range handlers {
		wg.Go(func() {
			for d := range g.events {
				target, event, _ := strings.Cut(d, "|")
				if err := g.handle(ctx, target, event); err != nil {
					errs <- err
					for range g.events {
					}
					return
				}
			}
		})
	}
	var relayErr error
	for idle := 0; idle < 5; {
		due, err := g.store.DueTimers(ctx, 1e9, 200)
		if err != nil {
			relayErr = err
			break
		}
		g.mu.Lock()
		for _, d := range due {
			g.fired[d.ExecutionID] = max(g.fired[d.ExecutionID], d.FireAt) // fired before deleted: at least once
		}
		g.mu.Unlock()
		if err := g.store.DeleteTimers(ctx, due); err != nil {
			relayErr = err
			break
		}
		pending, err := g.store.PendingOutbox(ctx, 200)
		if err != nil {
			relayErr = err
			break
		}
		if len(pending) == 0 && len(due) == 0 {
			idle++
			time.Sleep(20 * time.Millisecond)
			continue
		}
		idle = 0
		for _, p := range pending {
			g.events <- p.TargetID + "|" + string(p.Event) // delivered before acked: at least once
		}
		for _, p := range pending {
			if err := g.store.AckOutbox(ctx, p.SourceID, p.Seq); err != nil {
				relayErr = err
				break
			}
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
// acknowledged commit.
func TestCrashAndRecover(t *testing.T) {
	h := newHarness(t, aio.Options{})
	executions, maxVersion := 24, int64(10)
	if longRuns() {
		executions, maxVersion = 200, 40
	}
	g := &engine{store: h.store, executions: executions, maxVersion: maxVersion,
		acked: map[string]int64{}, fired: map[string]float64{}}
	for i := range executions {
		id := fmt.Sprintf("x%d", i)
		_, err := h.store.Commit(bg, &execstore.Execution{ID: id, DefinitionID: "chain", Status: execstore.Running},
			execstore.Commit{Emits: []execstore.Emit{{TargetID: id, Event: []byte(id + "/start")}}})
		require.NoError(t, err)
	}

	// First life: killed after a while, without draining.
	first, err := aio.Open(bg, server.URI, aio.Options{Database: h.opts.Database})
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
	second, err := aio.Open(bg, server.URI, aio.Options{Database: h.opts.Database})
	require.NoError(t, err)
	defer second.Close(bg)
	g.store = second
	require.NoError(t, g.run(bg, 6))

	// What was emitted: every execution's versions 2..final each emitted one event (below the
	// cap), plus the start events. What was processed: the dedupe sets.
	cur, err := h.db.Collection("executions").Find(bg, bson.D{})
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
		for v := int64(2); v <= version && v < maxVersion; v++ {
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
	due, err := second.DueTimers(bg, 1e9, 0)
	require.NoError(t, err)
	assert.Empty(t, due, "timers left after recovery")
	pending, err := second.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	t.Logf("%d executions, %d events processed exactly once across a crash", executions, len(processed))
}
