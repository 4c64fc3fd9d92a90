package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// The dedupe guard of Commit: a commit whose ProcessedEventID is already in its execution's
// dedupe set is refused with an *AlreadyProcessedError, in the same atomic write as the version
// guard and before it, and nothing of it is written.

// requireAlreadyProcessed fails t unless err is exactly the refusal of event on execution id
// found at the stored version, and not a conflict.
func requireAlreadyProcessed(t *testing.T, err error, id, event string, version int64) {
	t.Helper()
	require.ErrorIs(t, err, execstore.ErrAlreadyProcessed)
	assert.NotErrorIs(t, err, execstore.ErrConflict)
	var ae *execstore.AlreadyProcessedError
	require.ErrorAs(t, err, &ae)
	assert.Equal(t, execstore.AlreadyProcessedError{ExecutionID: id, EventID: event, Version: version}, *ae)
}

// requireConflict fails t unless err is exactly the conflict of execution id committed against
// expected with found stored, and not a refusal of its event.
func requireConflict(t *testing.T, err error, id string, expected, found int64) {
	t.Helper()
	require.ErrorIs(t, err, execstore.ErrConflict)
	assert.NotErrorIs(t, err, execstore.ErrAlreadyProcessed)
	var ce *execstore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, execstore.ConflictError{ExecutionID: id, Expected: expected, Found: found}, *ce)
}

// mustCommit commits c on exe and fails the test on any error.
func mustCommit(t *testing.T, s execstore.Store, exe *execstore.Execution, c execstore.Commit) []int64 {
	t.Helper()
	seqs, err := s.Commit(bg, exe, c)
	require.NoError(t, err)
	return seqs
}

// refused is a commit of event that touches every part of an execution, marked "refused": what
// a refused commit must leave no trace of.
func refused(event string) execstore.Commit {
	return execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "t", Event: []byte("refused")}},
		ProcessedEventID: event,
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("refused", at(1))},
		Spawns:           []execstore.Spawn{{ChildID: "refused", RootPath: "F.A"}},
		Trace:            map[string]any{"step": "refused"},
	}
}

// state is what a store shows of some executions and of its relays, read through the
// contract's methods: equal before and after a call, the call wrote nothing.
type state struct {
	exes   []*execstore.Execution
	traces [][]execstore.TraceStep
	outbox []execstore.OutboxEntry
	spawns []execstore.SpawnEntry
	timers []execstore.DueTimer
}

func stateOf(t *testing.T, s execstore.Store, ids ...string) state {
	t.Helper()
	var st state
	for _, id := range ids {
		exe, err := s.Load(bg, id)
		require.NoError(t, err)
		st.exes = append(st.exes, exe)
		st.traces = append(st.traces, readTrace(t, s, id))
	}
	var err error
	st.outbox, err = s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	st.spawns, err = s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	st.timers = due(t, s, time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC))
	return st
}

// A commit of an event the execution has already processed, made at the current version (its
// caller skipped LoadForEvent), is refused with an *AlreadyProcessedError naming the execution,
// the event and the stored version, whether the event is the last commit's or an older one's
// and whatever TraceNext the caller holds; nothing of it is written (snapshot, outbox entry,
// timer, spawn intent, trace step) and the caller's execution is unchanged.
func processedEventRefused(t *testing.T, s execstore.Store) {
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev1",
		Emits: []execstore.Emit{{Event: []byte("ev1")}}, Trace: map[string]any{"step": "ev1"}})
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev2", Trace: map[string]any{"step": "ev2"}})
	before := stateOf(t, s, "e")
	for _, c := range []struct {
		event     string
		traceNext int64
	}{{"ev1", e.TraceNext}, {"ev2", e.TraceNext}, {"ev2", 7}} {
		x := *e
		x.Data, x.Status, x.TraceNext = []byte(`"refused"`), execstore.Done, c.traceNext
		want := x
		seqs, err := s.Commit(bg, &x, refused(c.event))
		requireAlreadyProcessed(t, err, "e", c.event, 2)
		assert.Empty(t, seqs)
		assert.Equal(t, want, x, "the caller's execution changed")
		assert.Equal(t, before, stateOf(t, s, "e"), "a refused commit of %s wrote", c.event)
	}
}

// A commit of a processed event made at a stale version, or at a version ahead of the stored
// one, is refused with an *AlreadyProcessedError, not a conflict: reloading would not make the
// event worth handling again. Version is the stored version; nothing is written and the
// caller's execution is unchanged.
func processedEventAtStaleVersionRefused(t *testing.T, s execstore.Store) {
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev1"})
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev2", Trace: map[string]any{"step": "ev2"}})
	mustCommit(t, s, e, execstore.Commit{})
	before := stateOf(t, s, "e")
	for _, c := range []struct {
		version int64
		event   string
	}{{1, "ev1"}, {2, "ev1"}, {1, "ev2"}, {2, "ev2"}, {5, "ev2"}} {
		x := newExe("e")
		x.Version, x.TraceNext, x.Data = c.version, 7, []byte(`"refused"`)
		want := *x
		_, err := s.Commit(bg, x, refused(c.event))
		requireAlreadyProcessed(t, err, "e", c.event, 3)
		assert.Equal(t, want, *x, "the caller's execution changed")
		assert.Equal(t, before, stateOf(t, s, "e"), "a refused commit of %s at version %d wrote", c.event, c.version)
	}
}

// A stale version with an event the execution has not processed is still a conflict with
// expected and found, and the event is not marked: after a reload it is handled.
func unprocessedEventAtStaleVersionConflicts(t *testing.T, s execstore.Store) {
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev1"})
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev2"})
	before := stateOf(t, s, "e")
	x := newExe("e")
	x.Version = 1
	_, err := s.Commit(bg, x, refused("ev3"))
	requireConflict(t, err, "e", 1, 2)
	assert.EqualValues(t, 1, x.Version)
	assert.Equal(t, before, stateOf(t, s, "e"))
	exe, hit, err := s.LoadForEvent(bg, "e", "ev3")
	require.NoError(t, err)
	assert.False(t, hit, "a conflicting commit marked its event")
	mustCommit(t, s, exe, execstore.Commit{ProcessedEventID: "ev3"})
	assert.EqualValues(t, 3, exe.Version)
}

// On the create path (version 0) of an execution that exists, an event in its set is refused
// with an *AlreadyProcessedError at the stored version; any other event, or none, is a conflict
// with found the stored version. Nothing is written either way.
func processedEventOnCreateRefused(t *testing.T, s execstore.Store) {
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev1"}) // the create processes ev1
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev2"})
	before := stateOf(t, s, "e")
	for _, c := range []struct {
		event     string
		processed bool
	}{{"ev1", true}, {"ev2", true}, {"ev3", false}, {"", false}} {
		x := newExe("e")
		_, err := s.Commit(bg, x, refused(c.event))
		if c.processed {
			requireAlreadyProcessed(t, err, "e", c.event, 2)
		} else {
			requireConflict(t, err, "e", 0, 2)
		}
		assert.EqualValues(t, 0, x.Version)
		assert.Equal(t, before, stateOf(t, s, "e"), "a refused create of %q wrote", c.event)
	}
}

// Only the commit's own non-empty ProcessedEventID, looked up in its own execution's set, can
// refuse it: commits without one are never refused (Save included), and an event processed by
// one execution is new to another.
func commitWithoutEventNeverRefused(t *testing.T, s execstore.Store) {
	a := newExe("a")
	mustCommit(t, s, a, execstore.Commit{ProcessedEventID: "ev1", Emits: []execstore.Emit{{Event: []byte("ev1")}}})
	for i := range 3 {
		mustCommit(t, s, a, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("ev1")}},
			Spawns: []execstore.Spawn{{ChildID: "ev1"}}, Trace: map[string]any{"i": int64(i)}})
	}
	require.NoError(t, s.Save(bg, a))
	assert.EqualValues(t, 5, a.Version)
	b := newExe("b")
	mustCommit(t, s, b, execstore.Commit{ProcessedEventID: "ev1"}) // the create of b
	mustCommit(t, s, b, execstore.Commit{ProcessedEventID: "ev2"})
	_, err := s.Commit(bg, a, execstore.Commit{ProcessedEventID: "ev2"})
	require.NoError(t, err, "b's event refused on a")
	assert.EqualValues(t, 6, a.Version)
	assert.EqualValues(t, 2, b.Version)
}

// A refusal leaves the store and the caller ready for the next event: right after a refused
// commit the same execution commits a fresh event at the version it had, and the outbox holds
// the accepted commits' entries only, in commit order with increasing seqs.
func commitAfterRefusalSucceeds(t *testing.T, s execstore.Store) {
	e := newExe("e")
	first := mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev1", Emits: []execstore.Emit{{Event: []byte("ev1")}}})
	for range 2 {
		_, err := s.Commit(bg, e, execstore.Commit{ProcessedEventID: "ev1", Emits: []execstore.Emit{{Event: []byte("refused")}}})
		requireAlreadyProcessed(t, err, "e", "ev1", 1)
	}
	second := mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev2", Emits: []execstore.Emit{{Event: []byte("ev2")}}})
	assert.EqualValues(t, 2, e.Version)
	require.Len(t, first, 1)
	require.Len(t, second, 1)
	assert.Greater(t, second[0], first[0])
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.OutboxEntry{
		{Seq: first[0], SourceID: "e", Version: 1, Event: []byte("ev1")},
		{Seq: second[0], SourceID: "e", Version: 2, Event: []byte("ev2")},
	}, withoutCommitTimes(pending))
	got, err := s.Load(bg, "e")
	require.NoError(t, err)
	assert.Equal(t, e, got)
}

// Copies of one execution racing at one version with the same event, as redeliveries of one
// event to many handlers: exactly one wins; every other is refused with an
// *AlreadyProcessedError at the winner's version (its event is in the set: not a conflict) and
// keeps its version; each event leaves one outbox entry, the winner's.
func racingRedeliveriesOneWinner(t *testing.T, s execstore.Store) {
	require.NoError(t, s.Save(bg, newExe("e")))
	const rounds, racers = 8, 8
	winners := make([]string, rounds)
	for r := range rounds {
		cur, err := s.Load(bg, "e")
		require.NoError(t, err)
		event := fmt.Sprintf("ev%d", r)
		var wins, refusals atomic.Int64
		var wg sync.WaitGroup
		for i := range racers {
			c := *cur
			wg.Go(func() {
				mine := fmt.Sprintf("%s by %d", event, i)
				_, err := s.Commit(bg, &c, execstore.Commit{Emits: []execstore.Emit{{Event: []byte(mine)}}, ProcessedEventID: event})
				var ae *execstore.AlreadyProcessedError
				switch {
				case err == nil:
					wins.Add(1)
					winners[r] = mine
				case errors.As(err, &ae):
					refusals.Add(1)
					assert.Equal(t, execstore.AlreadyProcessedError{ExecutionID: "e", EventID: event, Version: cur.Version + 1}, *ae)
					assert.Equal(t, cur.Version, c.Version)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d", r)
		require.EqualValues(t, racers-1, refusals.Load(), "round %d", r)
	}
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, rounds)
	for r, p := range pending {
		assert.Equal(t, winners[r], string(p.Event))
		assert.EqualValues(t, r+2, p.Version)
	}
}
