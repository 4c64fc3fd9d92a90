package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// The store never returns a snapshot older than its own last successful commit, whatever it
// caches: what it committed is what Load and LoadForEvent give back next.

// requireLoads fails t unless Load and LoadForEvent of want.ID return want exactly (version,
// snapshot, status, trace index, …), LoadForEvent reporting each of processed as processed and
// "never-processed" as not.
func requireLoads(t *testing.T, s execstore.Store, want *execstore.Execution, processed ...string) {
	t.Helper()
	got, err := s.Load(bg, want.ID)
	require.NoError(t, err)
	require.Equal(t, want, got, "Load")
	for _, event := range append(processed, "never-processed") {
		got, hit, err := s.LoadForEvent(bg, want.ID, event)
		require.NoError(t, err)
		require.Equal(t, want, got, "LoadForEvent(%s)", event)
		require.Equal(t, event != "never-processed", hit, "LoadForEvent(%s)", event)
	}
}

// A sequence of commits, each followed by Load and LoadForEvent: both return exactly what the
// commit made (version, snapshot, status, trace index), LoadForEvent reports the commit's event
// and the first one as processed, and neither goes back after a conflict or a refusal in
// between. At the end LoadForEvent reports every event the store committed as processed.
func loadsReturnTheLastCommit(t *testing.T, s execstore.Store) {
	e := newExe("e")
	statuses := contract.Statuses()
	var events []string
	for i := range 8 {
		event := fmt.Sprintf("ev%d", i)
		e.Data = fmt.Appendf(nil, `{"n":%d}`, i)
		e.Status = statuses[i%len(statuses)]
		c := execstore.Commit{ProcessedEventID: event}
		if i%2 == 0 {
			c.Trace = map[string]any{"i": int64(i)}
		}
		mustCommit(t, s, e, c)
		events = append(events, event)
		requireLoads(t, s, e, events[0], event)
		switch i % 3 {
		case 1: // a stale copy conflicts
			stale := *e
			stale.Version--
			_, err := s.Commit(bg, &stale, execstore.Commit{ProcessedEventID: "stale", Trace: map[string]any{}})
			requireConflict(t, err, "e", e.Version-1, e.Version)
		case 2: // a redelivery is refused
			again := *e
			again.Data = []byte(`"refused"`)
			_, err := s.Commit(bg, &again, refused(events[i-1]))
			requireAlreadyProcessed(t, err, "e", events[i-1], e.Version)
		}
		requireLoads(t, s, e, event)
	}
	requireLoads(t, s, e, events...)
}

// Several goroutines, each owning an execution, each handling events in a loop: LoadForEvent
// returns exactly the execution's last commit and the new event unprocessed; after the commit
// Load and LoadForEvent return exactly what it made, with this event and the ones before it
// processed. Commits of other executions running at the same time change none of that.
func loadsReturnTheLastCommitConcurrently(t *testing.T, s execstore.Store) {
	const owners, events = 4, 6
	var wg sync.WaitGroup
	for o := range owners {
		wg.Go(func() {
			id := fmt.Sprintf("o%d", o)
			var last *execstore.Execution
			var done []string
			for i := range events {
				event := fmt.Sprintf("%s-ev%d", id, i)
				exe, hit, err := s.LoadForEvent(bg, id, event)
				if !assert.NoError(t, err) || !assert.Equal(t, last, exe, "%s before %s", id, event) || !assert.False(t, hit, event) {
					return
				}
				if exe == nil {
					exe = newExe(id)
				}
				exe.Data = fmt.Appendf(nil, `{"n":%d}`, i)
				c := execstore.Commit{ProcessedEventID: event, Emits: []execstore.Emit{{Event: []byte(event)}}}
				if i%2 == 1 {
					c.Trace = map[string]any{"i": int64(i)}
				}
				if _, err := s.Commit(bg, exe, c); !assert.NoError(t, err, event) {
					return
				}
				done = append(done, event)
				got, err := s.Load(bg, id)
				if !assert.NoError(t, err) || !assert.Equal(t, exe, got, "Load after %s", event) {
					return
				}
				for _, ev := range []string{done[0], done[len(done)/2], event} {
					got, hit, err := s.LoadForEvent(bg, id, ev)
					if !assert.NoError(t, err) || !assert.Equal(t, exe, got, "LoadForEvent(%s) after %s", ev, event) ||
						!assert.True(t, hit, "LoadForEvent(%s) after %s", ev, event) {
						return
					}
				}
				last = exe
			}
		})
	}
	wg.Wait()
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Len(t, pending, owners*events)
}
