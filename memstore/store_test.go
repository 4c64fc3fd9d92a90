package memstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/memstore"
)

var bg = context.Background()

func newExe(id string) *execstore.Execution {
	return &execstore.Execution{ID: id, DefinitionID: "def", Status: execstore.Running, Data: []byte(`{"n":0}`)}
}

// mustCommit commits c on exe and fails the test on any error.
func mustCommit(t *testing.T, s *memstore.Store, exe *execstore.Execution, c execstore.Commit) []int64 {
	t.Helper()
	seqs, err := s.Commit(bg, exe, c)
	require.NoError(t, err)
	return seqs
}

// everything is a commit that touches every part of an execution.
func everything(i int) execstore.Commit {
	return execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "t", Event: []byte(fmt.Sprintf("ev%d", i))}},
		ProcessedEventID: fmt.Sprintf("p%d", i),
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer(fmt.Sprintf("T%d", i), unixAt(float64(i)))},
		Spawns:           []execstore.Spawn{{ChildID: fmt.Sprintf("c%d", i), RootPath: "F.A"}},
		Trace:            map[string]any{"i": int64(i)},
	}
}

// state is everything a store shows, read through its public methods.
type state struct {
	exes    map[string]*execstore.Execution
	outbox  []execstore.OutboxEntry
	spawns  []execstore.SpawnEntry
	timers  []execstore.DueTimer
	traces  map[string][]execstore.TraceStep
	listing []execstore.Summary
}

func snapshot(t *testing.T, s *memstore.Store, ids ...string) state {
	t.Helper()
	st := state{exes: map[string]*execstore.Execution{}, traces: map[string][]execstore.TraceStep{}}
	var err error
	for _, id := range ids {
		st.exes[id], err = s.Load(bg, id)
		require.NoError(t, err)
		st.traces[id], err = s.ReadTrace(bg, id)
		require.NoError(t, err)
	}
	st.outbox, err = s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	st.spawns, err = s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	st.timers, err = s.DueTimers(bg, time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC), 0)
	require.NoError(t, err)
	page, err := s.List(bg, execstore.ListQuery{Limit: contract.MaxListLimit})
	require.NoError(t, err)
	st.listing = page.Items
	return st
}

func TestZeroOptions(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	for i := range contract.DefaultTraceMax + 10 {
		mustCommit(t, s, e, execstore.Commit{Trace: map[string]any{"i": int64(i)}, ProcessedEventID: fmt.Sprintf("ev%d", i)})
	}
	trace, err := s.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, contract.DefaultTraceMax, "the default TraceMax is the MongoDB store's")
	assert.EqualValues(t, 10, trace[0].Index)
	for i := range contract.DefaultTraceMax + 10 {
		hit, err := s.IsProcessed(bg, "e", fmt.Sprintf("ev%d", i))
		require.NoError(t, err)
		assert.True(t, hit, "no window: every id is kept")
	}
	// Negative values are the defaults too.
	s = memstore.New(memstore.Options{TraceMax: -1, DedupeWindow: -1})
	e = newExe("e")
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "x", Trace: map[string]any{}})
	for range 3 {
		mustCommit(t, s, e, execstore.Commit{})
	}
	hit, err := s.IsProcessed(bg, "e", "x")
	require.NoError(t, err)
	assert.True(t, hit)
}

// A call whose context has ended returns the context's error and does nothing.
func TestContextEnded(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	seqs := mustCommit(t, s, e, everything(1))
	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	before := snapshot(t, s, "e", "new")

	done, cancel := context.WithCancel(bg)
	cancel()
	fresh := newExe("new")
	stale := *e
	calls := map[string]func() error{
		"Load":          func() error { _, err := s.Load(done, "e"); return err },
		"LoadForEvent":  func() error { _, _, err := s.LoadForEvent(done, "e", "p1"); return err },
		"IsProcessed":   func() error { _, err := s.IsProcessed(done, "e", "p1"); return err },
		"Commit create": func() error { _, err := s.Commit(done, fresh, everything(2)); return err },
		"Commit update": func() error { _, err := s.Commit(done, &stale, everything(3)); return err },
		"Save":          func() error { return s.Save(done, &stale) },
		"List":          func() error { _, err := s.List(done, execstore.ListQuery{}); return err },
		"PendingOutbox": func() error { _, err := s.PendingOutbox(done, 0); return err },
		"AckOutbox":     func() error { return s.AckOutbox(done, "e", seqs[0]) },
		"PendingSpawns": func() error { _, err := s.PendingSpawns(done, 0); return err },
		"AckSpawn":      func() error { return s.AckSpawn(done, "e", spawns[0].Seq) },
		"DueTimers":     func() error { _, err := s.DueTimers(done, unixAt(10), 0); return err },
		"DeleteTimer":   func() error { _, err := s.DeleteTimer(done, "e", "T1", unixAt(1)); return err },
		"DeleteTimers": func() error {
			return s.DeleteTimers(done, []execstore.DueTimer{{ExecutionID: "e", Path: "T1", FireAt: unixAt(1)}})
		},
		"AppendTrace": func() error { return s.AppendTrace(done, "e", map[string]any{"x": 1}) },
		"ReadTrace":   func() error { _, err := s.ReadTrace(done, "e"); return err },
	}
	for name, call := range calls {
		assert.ErrorIs(t, call(), context.Canceled, name)
	}
	assert.Equal(t, before, snapshot(t, s, "e", "new"), "a call with an ended context changed the store")
	assert.EqualValues(t, 0, fresh.Version)
	assert.EqualValues(t, 1, stale.Version)

	// Bad input is refused before the context is looked at, as by the MongoDB store.
	_, err = s.Load(done, "")
	assert.ErrorIs(t, err, execstore.ErrInvalid)
}

// After Close every call returns ErrClosed; bad input is still ErrInvalid; Close again is a
// no-op.
func TestClose(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	mustCommit(t, s, e, everything(1))
	require.NoError(t, s.Close(bg))

	calls := map[string]func() error{
		"Load":          func() error { _, err := s.Load(bg, "e"); return err },
		"LoadForEvent":  func() error { _, _, err := s.LoadForEvent(bg, "e", "p1"); return err },
		"IsProcessed":   func() error { _, err := s.IsProcessed(bg, "e", "p1"); return err },
		"Commit":        func() error { _, err := s.Commit(bg, e, everything(2)); return err },
		"Save":          func() error { return s.Save(bg, newExe("x")) },
		"List":          func() error { _, err := s.List(bg, execstore.ListQuery{}); return err },
		"PendingOutbox": func() error { _, err := s.PendingOutbox(bg, 0); return err },
		"AckOutbox":     func() error { return s.AckOutbox(bg, "e", 1) },
		"PendingSpawns": func() error { _, err := s.PendingSpawns(bg, 0); return err },
		"AckSpawn":      func() error { return s.AckSpawn(bg, "e", 1) },
		"DueTimers":     func() error { _, err := s.DueTimers(bg, unixAt(10), 0); return err },
		"DeleteTimer":   func() error { _, err := s.DeleteTimer(bg, "e", "T1", unixAt(1)); return err },
		"DeleteTimers": func() error {
			return s.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "e", Path: "T1", FireAt: unixAt(1)}})
		},
		"AppendTrace": func() error { return s.AppendTrace(bg, "e", map[string]any{"x": 1}) },
		"ReadTrace":   func() error { _, err := s.ReadTrace(bg, "e"); return err },
	}
	for name, call := range calls {
		assert.ErrorIs(t, call(), execstore.ErrClosed, name)
	}
	assert.EqualValues(t, 1, e.Version, "a refused commit changed the caller's execution")
	_, err := s.Load(bg, "")
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	require.NoError(t, s.Close(bg))

	// Close needs nothing of its context.
	s = memstore.New(memstore.Options{})
	done, cancel := context.WithCancel(bg)
	cancel()
	require.NoError(t, s.Close(done))
	_, err = s.Load(bg, "e")
	assert.ErrorIs(t, err, execstore.ErrClosed)
}

// The store keeps none of the caller's slices and maps, and hands out none of its own.
func TestNoAliasing(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	data := []byte("snapshot")
	e.Data = data
	event := []byte("event")
	spawnCtx := map[string]any{"k": "v", "nested": map[string]any{"x": "y"}, "list": []any{"a"}}
	step := map[string]any{"k": "v", "list": []any{"a"}}
	c := execstore.Commit{
		Emits:  []execstore.Emit{{TargetID: "t", Event: event}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(1))},
		Spawns: []execstore.Spawn{{ChildID: "c", Context: spawnCtx}},
		Trace:  step,
	}
	mustCommit(t, s, e, c)
	require.NoError(t, s.AppendTrace(bg, "e", step))

	// The caller changes everything it passed.
	data[0] = 'X'
	event[0] = 'X'
	spawnCtx["k"] = "changed"
	spawnCtx["nested"].(map[string]any)["x"] = "changed"
	spawnCtx["list"].([]any)[0] = "changed"
	step["k"] = "changed"
	step["list"].([]any)[0] = "changed"
	c.Timers[0] = execstore.CancelTimer("T")

	got, err := s.Load(bg, "e")
	require.NoError(t, err)
	assert.Equal(t, "snapshot", string(got.Data))
	got.Data[0] = 'Y' // and changes what it got back
	again, err := s.Load(bg, "e")
	require.NoError(t, err)
	assert.Equal(t, "snapshot", string(again.Data))
	loaded, _, err := s.LoadForEvent(bg, "e", "x")
	require.NoError(t, err)
	loaded.Data[0] = 'Z'
	again, err = s.Load(bg, "e")
	require.NoError(t, err)
	assert.Equal(t, "snapshot", string(again.Data))

	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Equal(t, "event", string(pending[0].Event))
	pending[0].Event[0] = 'Y'
	pending, err = s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Equal(t, "event", string(pending[0].Event))

	want := map[string]any{"k": "v", "nested": map[string]any{"x": "y"}, "list": []any{"a"}}
	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Equal(t, want, spawns[0].Context)
	spawns[0].Context["k"] = "mine"
	spawns[0].Context["nested"].(map[string]any)["x"] = "mine"
	spawns, err = s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Equal(t, want, spawns[0].Context)

	trace, err := s.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 2)
	for _, st := range trace {
		assert.Equal(t, map[string]any{"k": "v", "list": []any{"a"}}, st.Fields)
	}
	trace[0].Fields["k"] = "mine"
	trace[0].Fields["list"].([]any)[0] = "mine"
	trace, err = s.ReadTrace(bg, "e")
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"k": "v", "list": []any{"a"}}, trace[0].Fields)

	due, err := s.DueTimers(bg, unixAt(10), 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "T", FireAt: unixAt(1), Version: 1}}, due)

	// The statuses of a query are read during the call only.
	q := execstore.ListQuery{Statuses: []execstore.Status{execstore.Running}}
	page, err := s.List(bg, q)
	require.NoError(t, err)
	q.Statuses[0] = execstore.Done
	assert.Len(t, page.Items, 1)
}
