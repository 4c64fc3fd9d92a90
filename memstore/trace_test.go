package memstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
)

// 12. Trace: increasing indices, in order; with TraceMax 2 one more commit leaves exactly the
// last two steps.
func TestTraceRing(t *testing.T) {
	s := memstore.New(memstore.Options{TraceMax: 2})
	e := newExe("e")
	for i := range 2 {
		mustCommit(t, s, e, execstore.Commit{Trace: map[string]any{"step": int64(i)}})
	}
	trace, err := s.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 2)
	assert.Less(t, trace[0].Index, trace[1].Index)
	mustCommit(t, s, e, execstore.Commit{Trace: map[string]any{"step": int64(2)}})
	trace, err = s.ReadTrace(bg, "e")
	require.NoError(t, err)
	assert.Equal(t, []execstore.TraceStep{
		{Index: 1, Fields: map[string]any{"step": int64(1)}},
		{Index: 2, Fields: map[string]any{"step": int64(2)}},
	}, withoutTimes(trace))
	assert.EqualValues(t, 3, e.TraceNext)
}

// Commits without a step take no index; the ring keeps the last TraceMax steps.
func TestTraceRingSkipsUntracedCommits(t *testing.T) {
	s := memstore.New(memstore.Options{TraceMax: 3})
	e := newExe("e")
	for i := range 10 {
		c := execstore.Commit{}
		if i%3 != 1 {
			c.Trace = map[string]any{"i": int64(i)}
		}
		mustCommit(t, s, e, c)
	}
	trace, err := s.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 3)
	assert.Equal(t, []any{int64(6), int64(8), int64(9)},
		[]any{trace[0].Fields["i"], trace[1].Fields["i"], trace[2].Fields["i"]})
	assert.Equal(t, []int64{4, 5, 6}, []int64{trace[0].Index, trace[1].Index, trace[2].Index})
	assert.EqualValues(t, 7, e.TraceNext)
	got, err := s.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, 7, got.TraceNext)
}

// AppendTrace stamps the next index, interleaves with commits (a stale TraceNext in the
// caller's execution still gets a fresh index), needs an existing execution, and leaves the
// version alone.
func TestAppendTrace(t *testing.T) {
	s := memstore.New(memstore.Options{})
	err := s.AppendTrace(bg, "nope", map[string]any{"x": 1})
	require.ErrorIs(t, err, execstore.ErrNotFound)
	got, err := s.Load(bg, "nope")
	require.NoError(t, err)
	assert.Nil(t, got, "an append created an execution")

	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{Trace: map[string]any{"k": "c1"}})
	require.NoError(t, s.AppendTrace(bg, "e", map[string]any{"k": "a1"}))
	require.NoError(t, s.AppendTrace(bg, "e", map[string]any{}))
	assert.EqualValues(t, 1, e.TraceNext, "stale now")
	mustCommit(t, s, e, execstore.Commit{Trace: map[string]any{"k": "c2"}})
	assert.EqualValues(t, 2, e.Version)
	assert.EqualValues(t, 4, e.TraceNext)
	trace, err := s.ReadTrace(bg, "e")
	require.NoError(t, err)
	assert.Equal(t, []execstore.TraceStep{
		{Index: 0, Fields: map[string]any{"k": "c1"}},
		{Index: 1, Fields: map[string]any{"k": "a1"}},
		{Index: 2, Fields: map[string]any{}},
		{Index: 3, Fields: map[string]any{"k": "c2"}},
	}, withoutTimes(trace))
	got, err = s.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, 2, got.Version)
	assert.EqualValues(t, 4, got.TraceNext)

	// A commit without a step also hands back the execution's next index.
	require.NoError(t, s.AppendTrace(bg, "e", map[string]any{}))
	require.NoError(t, s.Save(bg, e))
	assert.EqualValues(t, 5, e.TraceNext)

	trace, err = s.ReadTrace(bg, "unknown")
	require.NoError(t, err)
	assert.Nil(t, trace)
	require.NoError(t, s.Save(bg, newExe("none")))
	trace, err = s.ReadTrace(bg, "none")
	require.NoError(t, err)
	assert.NotNil(t, trace)
	assert.Empty(t, trace)
}

// The MongoDB store's create path starts the trace at the caller's TraceNext.
func TestTraceStartsAtCreatorsTraceNext(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	e.TraceNext = 5
	mustCommit(t, s, e, execstore.Commit{Trace: map[string]any{}})
	assert.EqualValues(t, 6, e.TraceNext)
	trace, err := s.ReadTrace(bg, "e")
	require.NoError(t, err)
	assert.Equal(t, []execstore.TraceStep{{Index: 5, Fields: map[string]any{}}}, withoutTimes(trace))
}

// Trace steps and spawn contexts come back as a MongoDB read returns them: nested documents
// as map[string]any, arrays as []any, numbers as the BSON types they were encoded as.
func TestStepsRoundTripAsBSON(t *testing.T) {
	in := map[string]any{
		"int":     1,
		"int64":   int64(1 << 40),
		"int32":   int32(7),
		"float":   1.5,
		"string":  "ünï.$",
		"bool":    true,
		"nil":     nil,
		"strings": []string{"a", "b"},
		"ints":    []int{1, 2},
		"nested":  map[string]any{"deeper": map[string]any{"list": []any{map[string]any{"x": "y"}}}},
		"doc":     bson.D{{Key: "k", Value: "v"}},
		"m":       bson.M{"k": int64(2)},
		"a.b":     "dotted",
		"$k":      []any{"v"},
	}
	want := map[string]any{
		"int":     int32(1),
		"int64":   int64(1 << 40),
		"int32":   int32(7),
		"float":   1.5,
		"string":  "ünï.$",
		"bool":    true,
		"nil":     nil,
		"strings": []any{"a", "b"},
		"ints":    []any{int32(1), int32(2)},
		"nested":  map[string]any{"deeper": map[string]any{"list": []any{map[string]any{"x": "y"}}}},
		"doc":     map[string]any{"k": "v"},
		"m":       map[string]any{"k": int64(2)},
		"a.b":     "dotted",
		"$k":      []any{"v"},
	}
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{Trace: in, Spawns: []execstore.Spawn{{ChildID: "c", Context: in}}})
	require.NoError(t, s.AppendTrace(bg, "e", in))
	trace, err := s.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 2)
	assert.Equal(t, want, trace[0].Fields)
	assert.Equal(t, want, trace[1].Fields)
	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Equal(t, want, spawns[0].Context)
}

// withoutTimes returns steps with their At zeroed, for comparisons of what else they hold
// (storetest checks the times).
func withoutTimes(steps []execstore.TraceStep) []execstore.TraceStep {
	out := make([]execstore.TraceStep, len(steps))
	for i, st := range steps {
		st.At = time.Time{}
		out[i] = st
	}
	return out
}
