package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

func readTrace(t *testing.T, s execstore.Store, id string) []execstore.TraceStep {
	t.Helper()
	trace, err := s.ReadTrace(bg, id)
	require.NoError(t, err)
	return trace
}

// Three traced commits give steps with strictly increasing indices, oldest first, each with
// its fields; an unknown execution has none.
func traceIndices(t *testing.T, s execstore.Store) {
	e := newExe("e")
	for i := range 3 {
		_, err := s.Commit(bg, e, execstore.Commit{Trace: map[string]any{"step": int64(i), "nested": map[string]any{"a.b": []any{"$x"}}}})
		require.NoError(t, err)
	}
	trace := readTrace(t, s, "e")
	require.Len(t, trace, 3)
	for i := range trace {
		assert.Equal(t, int64(i), trace[i].Fields["step"])
		assert.Equal(t, map[string]any{"a.b": []any{"$x"}}, trace[i].Fields["nested"])
		if i > 0 {
			assert.Greater(t, trace[i].Index, trace[i-1].Index)
		}
	}
	assert.Empty(t, readTrace(t, s, "unknown"))
}

// AppendTrace stamps the next index, interleaves with commits (a commit made with a stale
// TraceNext still gets a fresh, larger index), leaves the version alone, and needs an
// existing execution.
func appendTrace(t *testing.T, s execstore.Store) {
	err := s.AppendTrace(bg, "nope", map[string]any{"x": 1})
	require.ErrorIs(t, err, execstore.ErrNotFound)
	got, err := s.Load(bg, "nope")
	require.NoError(t, err)
	assert.Nil(t, got, "an append to an unknown execution created it")

	e := newExe("e")
	_, err = s.Commit(bg, e, execstore.Commit{Trace: map[string]any{"k": "c1"}})
	require.NoError(t, err)
	require.NoError(t, s.AppendTrace(bg, "e", map[string]any{"k": "a1"}))
	_, err = s.Commit(bg, e, execstore.Commit{Trace: map[string]any{"k": "c2"}})
	require.NoError(t, err)
	assert.EqualValues(t, 2, e.Version)
	trace := readTrace(t, s, "e")
	require.Len(t, trace, 3)
	assert.Equal(t, []int64{0, 1, 2}, []int64{trace[0].Index, trace[1].Index, trace[2].Index})
	assert.Equal(t, []any{"c1", "a1", "c2"}, []any{trace[0].Fields["k"], trace[1].Fields["k"], trace[2].Fields["k"]})
	got, err = s.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, 2, got.Version)
	assert.EqualValues(t, 3, got.TraceNext)
}

// With TraceMax 2, three traced commits and one more leave exactly the last two steps.
func traceWindow(t *testing.T, open func(t *testing.T, w Windows) execstore.Store) {
	s := open(t, Windows{TraceMax: 2})
	e := newExe("e")
	for i := range 4 {
		_, err := s.Commit(bg, e, execstore.Commit{Trace: map[string]any{"step": int64(i)}})
		require.NoError(t, err)
		trace := readTrace(t, s, "e")
		require.Len(t, trace, min(i+1, 2))
	}
	trace := readTrace(t, s, "e")
	assert.Equal(t, []any{int64(2), int64(3)}, []any{trace[0].Fields["step"], trace[1].Fields["step"]})
	assert.Greater(t, trace[1].Index, trace[0].Index)
	require.NoError(t, s.AppendTrace(bg, "e", map[string]any{"step": int64(4)}))
	trace = readTrace(t, s, "e")
	assert.Equal(t, []any{int64(3), int64(4)}, []any{trace[0].Fields["step"], trace[1].Fields["step"]})
}

// With TraceMax 3, commits without a step in between: the last three steps are kept.
func traceWindowSparse(t *testing.T, open func(t *testing.T, w Windows) execstore.Store) {
	s := open(t, Windows{TraceMax: 3})
	e := newExe("e")
	for i := range 10 {
		c := execstore.Commit{}
		if i%3 != 1 {
			c.Trace = map[string]any{"i": int64(i)}
		}
		_, err := s.Commit(bg, e, c)
		require.NoError(t, err)
	}
	trace := readTrace(t, s, "e")
	require.Len(t, trace, 3)
	assert.Equal(t, []any{int64(6), int64(8), int64(9)},
		[]any{trace[0].Fields["i"], trace[1].Fields["i"], trace[2].Fields["i"]})
}

// traceTimes: a step records its commit's time, the one the commit's outbox entry records,
// and a step appended outside a commit the time of the append; each in UTC to the
// millisecond, between the call's start and its return, and kept as it was by later writes.
func traceTimes(t *testing.T, s execstore.Store) {
	e := newExe("trace-times")
	before := time.Now().Truncate(time.Millisecond)
	mustCommit(t, s, e, execstore.Commit{Trace: map[string]any{"k": "c1"},
		Emits: []execstore.Emit{{TargetID: "t", Event: []byte("one")}}})
	after := time.Now()
	time.Sleep(2 * time.Millisecond)
	require.NoError(t, s.AppendTrace(bg, e.ID, map[string]any{"k": "a1"}))
	appended := time.Now()
	trace := readTrace(t, s, e.ID)
	require.Len(t, trace, 2)
	first := trace[0].At
	assert.Equal(t, time.UTC, first.Location(), "recorded at %s", first)
	assert.Equal(t, first.Truncate(time.Millisecond), first, "not whole milliseconds")
	assert.False(t, first.Before(before) || first.After(after), "step recorded at %s, the commit ran from %s to %s",
		first, before, after)
	out, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.True(t, out[0].CommittedAt.Equal(first), "the step's %s, its commit's entry's %s", first, out[0].CommittedAt)
	assert.True(t, trace[1].At.After(first) && !trace[1].At.After(appended), "appended at %s, after the commit's %s",
		trace[1].At, first)
	mustCommit(t, s, e, execstore.Commit{})
	assert.Equal(t, trace, readTrace(t, s, e.ID), "a later commit changed the steps")
}
