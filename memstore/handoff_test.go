package memstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/internal/wake/waketest"
	"github.com/execstore/execstore/memstore"
)

// Every commit is bracketed by a Begin and an End on the relays' sinks, the End before
// Commit returns. A won commit hands over what PendingOutbox, PendingSpawns and DueTimers
// then return for it. A conflict, an AlreadyProcessed and a refused commit hand over nil.
func TestCommitsHandedToSinks(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	rec := waketest.Subscribe(t, wake.Of(store))

	exe := &execstore.Execution{ID: "x", DefinitionID: "d", Status: execstore.Running}
	commit := func(exe *execstore.Execution, c execstore.Commit) ([]waketest.Outcome, error) {
		var err error
		got := rec.Run(exe.ID, func() { _, err = store.Commit(ctx, exe, c) })
		return got, err
	}

	fire := time.Unix(1_700_000_000, 123_456_789) // not whole microseconds: read back rounded
	got, err := commit(exe, execstore.Commit{
		Emits:  []execstore.Emit{{TargetID: "t", Event: []byte("created")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("A", fire)},
	})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].C, "the creating commit won")
	assert.EqualValues(t, 1, got[0].C.Version)
	waketest.AssertReadBack(t, store, got[0].C)

	got, err = commit(exe, execstore.Commit{
		Emits: []execstore.Emit{{Event: []byte("one")}, {TargetID: "u", Event: []byte("two")}},
		Spawns: []execstore.Spawn{{ChildID: "c1", RootPath: "F.A", Context: map[string]any{"n": 1, "s": "v"}},
			{ChildID: "c2", RootPath: "F.B"}},
		Timers: []execstore.TimerOp{execstore.CancelTimer("A"), execstore.ScheduleTimer("B", fire.Add(time.Second)),
			execstore.ScheduleTimer("C", fire.Add(-time.Hour))},
		ProcessedEventID: "p1",
	})
	require.NoError(t, err)
	require.Len(t, got, 1)
	require.NotNil(t, got[0].C)
	assert.EqualValues(t, 2, got[0].C.Version)
	assert.Len(t, got[0].C.Outbox, 2)
	assert.Len(t, got[0].C.Spawns, 2)
	assert.Equal(t, []string{"A", "B", "C"}, timerPaths(got[0].C), "the timer ops in commit order")
	waketest.AssertReadBack(t, store, got[0].C)

	stale := *exe
	stale.Version--
	got, err = commit(&stale, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("lost")}}})
	require.ErrorIs(t, err, execstore.ErrConflict)
	assert.Equal(t, []waketest.Outcome{{ID: "x"}}, got, "a conflict hands over nothing")

	got, err = commit(exe, execstore.Commit{ProcessedEventID: "p1"})
	require.ErrorIs(t, err, execstore.ErrAlreadyProcessed)
	assert.Equal(t, []waketest.Outcome{{ID: "x"}}, got, "an AlreadyProcessed hands over nothing")

	ended, cancel := context.WithCancel(ctx)
	cancel()
	got = rec.Run("x", func() { _, err = store.Commit(ended, exe, execstore.Commit{}) })
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, []waketest.Outcome{{ID: "x"}}, got, "a commit refused for its context hands over nothing")

	require.NoError(t, store.Close(ctx))
	got, err = commit(exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("closed")}}})
	require.ErrorIs(t, err, execstore.ErrClosed)
	assert.Equal(t, []waketest.Outcome{{ID: "x"}}, got, "a commit refused by a closed store hands over nothing")
	assert.Zero(t, rec.Open())
}

// timerPaths returns the paths of c's timer ops, in order.
func timerPaths(c *wake.Committed) []string {
	var paths []string
	for _, op := range c.Timers {
		paths = append(paths, op.Path)
	}
	return paths
}
