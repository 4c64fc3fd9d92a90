package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// Bad commit input is refused with an *InvalidError naming the field, and nothing is written.
func badCommitInput(t *testing.T, s execstore.Store) {
	ok := func() *execstore.Execution { return newExe("ok") }
	withExe := func(f func(*execstore.Execution)) *execstore.Execution { e := ok(); f(e); return e }
	huge := make([]byte, execstore.MaxDocumentBytes)
	commits := []struct {
		name  string
		exe   *execstore.Execution
		c     execstore.Commit
		field string
	}{
		{"nil execution", nil, execstore.Commit{}, "Execution"},
		{"empty id", withExe(func(e *execstore.Execution) { e.ID = "" }), execstore.Commit{}, "Execution.ID"},
		{"long id", withExe(func(e *execstore.Execution) { e.ID = strings.Repeat("x", 2000) }), execstore.Commit{}, "Execution.ID"},
		{"nul id", withExe(func(e *execstore.Execution) { e.ID = "a\x00b" }), execstore.Commit{}, "Execution.ID"},
		{"invalid utf8 id", withExe(func(e *execstore.Execution) { e.ID = "a\xffb" }), execstore.Commit{}, "Execution.ID"},
		{"bad status", withExe(func(e *execstore.Execution) { e.Status = "NOPE" }), execstore.Commit{}, "Execution.Status"},
		{"negative version", withExe(func(e *execstore.Execution) { e.Version = -1 }), execstore.Commit{}, "Execution.Version"},
		{"huge snapshot", withExe(func(e *execstore.Execution) { e.Data = huge }), execstore.Commit{}, "Execution.Data"},
		{"zero fire time", ok(), execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", time.Time{})}}, "Commit.Timers[0].FireAt"},
		{"fire time past year 9999", ok(), execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("b"), execstore.ScheduleTimer("a", contract.MaxFireTime.Add(time.Second))}}, "Commit.Timers[1].FireAt"},
		{"fire time before year 1", ok(), execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", contract.MinFireTime.Add(-time.Nanosecond))}}, "Commit.Timers[0].FireAt"},
		{"emit without an event", ok(), execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("e")}, {TargetID: "t"}}}, "Commit.Emits[1].Event"},
		{"emit with an empty event", ok(), execstore.Commit{Emits: []execstore.Emit{{Event: []byte{}}}}, "Commit.Emits[0].Event"},
		{"empty timer path", ok(), execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("")}}, "Commit.Timers[0].Path"},
		{"NUL processed id", ok(), execstore.Commit{ProcessedEventID: "\x00"}, "Commit.ProcessedEventID"},
		{"empty child id", ok(), execstore.Commit{Spawns: []execstore.Spawn{{RootPath: "x"}}}, "Commit.Spawns[0].ChildID"},
		{"invalid root path", ok(), execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "c", RootPath: "F\xff"}}}, "Commit.Spawns[0].RootPath"},
		{"unencodable context", ok(), execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "c", Context: map[string]any{"f": func() {}}}}}, "Commit.Spawns[0].Context"},
		{"unencodable trace", ok(), execstore.Commit{Trace: map[string]any{"ch": make(chan int)}}, "Commit.Trace"},
		{"huge emits", ok(), execstore.Commit{Emits: []execstore.Emit{{Event: huge[:9<<20]}, {Event: huge[:9<<20]}}}, "Commit"},
	}
	for _, c := range commits {
		_, err := s.Commit(bg, c.exe, c.c)
		require.ErrorIs(t, err, execstore.ErrInvalid, c.name)
		var ie *execstore.InvalidError
		require.ErrorAs(t, err, &ie, c.name)
		assert.Equal(t, c.field, ie.Field, c.name)
	}
	got, err := s.Load(bg, "ok")
	require.NoError(t, err)
	assert.Nil(t, got, "bad input was written")
}

// A commit whose raw lengths pass but whose write would be past 16 MiB once encoded (each "."
// of a timer path is stored as three bytes; every outbox entry carries its seq, version and
// framing) is refused with ErrInvalid, and nothing of it is written.
func commitPastLimitEncoded(t *testing.T, s execstore.Store) {
	dotted := execstore.Commit{}
	for i := range 2000 {
		dotted.Timers = append(dotted.Timers, execstore.ScheduleTimer(fmt.Sprintf("%04d%s", i, strings.Repeat(".", 996)), at(1)))
	}
	emits := execstore.Commit{Emits: make([]execstore.Emit, 40_000)}
	for i := range emits.Emits {
		emits.Emits[i] = execstore.Emit{TargetID: "t", Event: []byte{'e'}}
	}
	for _, c := range []struct {
		name string
		data int
		c    execstore.Commit
	}{{"dotted timer paths", 14 << 20, dotted}, {"many small emits", 13 << 20, emits}} {
		e := newExe("big")
		e.Data = make([]byte, c.data)
		_, err := s.Commit(bg, e, c.c)
		require.ErrorIs(t, err, execstore.ErrInvalid, c.name)
		assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, c.name)
		assert.EqualValues(t, 0, e.Version, c.name)
	}
	got, err := s.Load(bg, "big")
	require.NoError(t, err)
	assert.Nil(t, got, "a refused commit was written")
	pending, err := s.PendingOutbox(bg, 1)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// Bad input to every other call is refused with ErrInvalid; nothing is written.
func badCallInput(t *testing.T, s execstore.Store) {
	calls := map[string]func() error{
		"Load empty":          func() error { _, err := s.Load(bg, ""); return err },
		"LoadForEvent empty":  func() error { _, _, err := s.LoadForEvent(bg, "x", ""); return err },
		"IsProcessed empty":   func() error { _, err := s.IsProcessed(bg, "", "e"); return err },
		"List negative limit": func() error { _, err := s.List(bg, execstore.ListQuery{Limit: -1}); return err },
		"List huge limit":     func() error { _, err := s.List(bg, execstore.ListQuery{Limit: contract.MaxListLimit + 1}); return err },
		"List bad status": func() error {
			_, err := s.List(bg, execstore.ListQuery{Statuses: []execstore.Status{"x"}})
			return err
		},
		"List garbage cursor":   func() error { _, err := s.List(bg, execstore.ListQuery{Cursor: "%%"}); return err },
		"PendingOutbox limit":   func() error { _, err := s.PendingOutbox(bg, -1); return err },
		"PendingSpawns limit":   func() error { _, err := s.PendingSpawns(bg, -5); return err },
		"AckOutbox empty":       func() error { return s.AckOutbox(bg, "", 1) },
		"AckSpawn empty":        func() error { return s.AckSpawn(bg, "", 1) },
		"DueTimers limit":       func() error { _, err := s.DueTimers(bg, at(1), -1); return err },
		"DeleteTimer path":      func() error { _, err := s.DeleteTimer(bg, "x", "", at(1)); return err },
		"DeleteTimers id":       func() error { return s.DeleteTimers(bg, []execstore.DueTimer{{Path: "p", FireAt: at(1)}}) },
		"AppendTrace nil":       func() error { return s.AppendTrace(bg, "x", nil) },
		"AppendTrace encodable": func() error { return s.AppendTrace(bg, "x", map[string]any{"f": func() {}}) },
		"ReadTrace empty":       func() error { _, err := s.ReadTrace(bg, ""); return err },
	}
	for name, call := range calls {
		assert.ErrorIs(t, call(), execstore.ErrInvalid, name)
	}
	page, err := s.List(bg, execstore.ListQuery{})
	require.NoError(t, err)
	assert.Empty(t, page.Items, "bad input was written")
}

// Ids, event ids, targets and paths holding ".", "$", the fullwidth stop, spaces and
// non-ASCII text round-trip through every operation.
func oddIdsRoundTrip(t *testing.T, s execstore.Store) {
	ids := []string{"a.b", "$set", "$$ROOT", "Fork．A", "x y", "ünï 日本", "%2E", "_id", "a$b.c"}
	for i, id := range ids {
		event := "$ev." + id
		e := &execstore.Execution{ID: id, DefinitionID: "def." + id, Status: execstore.Running, ParentID: "$p." + id}
		seqs, err := s.Commit(bg, e, execstore.Commit{
			Emits:            []execstore.Emit{{TargetID: ids[(i+1)%len(ids)], Event: []byte(event)}},
			ProcessedEventID: event,
			Spawns:           []execstore.Spawn{{ChildID: "$child." + id, RootPath: "R." + id}},
			Timers:           []execstore.TimerOp{execstore.ScheduleTimer(id, at(float64(i+1)))},
			Trace:            map[string]any{id: id},
		})
		require.NoError(t, err, id)
		got, hit, err := s.LoadForEvent(bg, id, event)
		require.NoError(t, err, id)
		require.NotNil(t, got, id)
		assert.True(t, hit, id)
		assert.Equal(t, "$p."+id, got.ParentID)
		_, hit, err = s.LoadForEvent(bg, id, "$other")
		require.NoError(t, err)
		assert.False(t, hit, id)
		p, err := s.IsProcessed(bg, id, event)
		require.NoError(t, err)
		assert.True(t, p, id)
		trace := readTrace(t, s, id)
		require.Len(t, trace, 1)
		assert.Equal(t, id, trace[0].Fields[id])
		page, err := s.List(bg, execstore.ListQuery{DefinitionID: "def." + id})
		require.NoError(t, err)
		require.Len(t, page.Items, 1, id)
		assert.Equal(t, id, page.Items[0].ID)
		require.NoError(t, s.AckOutbox(bg, id, seqs[0]))
	}
	d := due(t, s, at(100))
	require.Len(t, d, len(ids))
	for i, x := range d {
		assert.Equal(t, ids[i], x.ExecutionID)
		assert.Equal(t, ids[i], x.Path)
	}
	spawned, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Len(t, spawned, len(ids))
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	var all []string
	for q := (execstore.ListQuery{Limit: 2}); ; {
		page, err := s.List(bg, q)
		require.NoError(t, err)
		for _, it := range page.Items {
			all = append(all, it.ID)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	assert.ElementsMatch(t, ids, all)
}

// A call whose context has already ended returns the context's error and has no effect.
func endedContext(t *testing.T, s execstore.Store) {
	ctx, cancel := context.WithCancel(bg)
	cancel()
	e := newExe("e")
	_, err := s.Commit(ctx, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("x")}}})
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, "never sent: certainly not applied")
	assert.EqualValues(t, 0, e.Version)
	_, err = s.Load(ctx, "e")
	assert.ErrorIs(t, err, context.Canceled)
	require.NoError(t, s.Save(bg, e))
	assert.ErrorIs(t, s.AppendTrace(ctx, "e", map[string]any{"x": 1}), context.Canceled)
	assert.ErrorIs(t, s.AckOutbox(ctx, "e", 1), context.Canceled)

	got, err := s.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, 1, got.Version)
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	assert.Empty(t, readTrace(t, s, "e"))
}

// After Close every call returns ErrClosed; what was committed before is kept.
func closeRefuses(t *testing.T, s execstore.Store) {
	e := newExe("e")
	require.NoError(t, s.Save(bg, e))
	require.NoError(t, s.Close(bg))
	_, err := s.Load(bg, "e")
	assert.ErrorIs(t, err, execstore.ErrClosed)
	_, err = s.Commit(bg, e, execstore.Commit{})
	assert.ErrorIs(t, err, execstore.ErrClosed)
	_, err = s.PendingOutbox(bg, 0)
	assert.ErrorIs(t, err, execstore.ErrClosed)
	assert.ErrorIs(t, s.AckOutbox(bg, "e", 1), execstore.ErrClosed)
	assert.EqualValues(t, 1, e.Version)
}
