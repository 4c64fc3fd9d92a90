package memstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
)

// Bad commit input is refused with ErrInvalid naming the field, as the MongoDB store refuses
// it (the conformance suite checks the other fields); nothing is written, the caller's
// execution is untouched, and Save checks as Commit does.
func TestBadCommit(t *testing.T) {
	s := memstore.New(memstore.Options{})
	ok := func() *execstore.Execution { return newExe("ok") }
	withExe := func(f func(*execstore.Execution)) *execstore.Execution { e := ok(); f(e); return e }
	for _, c := range []struct {
		name  string
		exe   *execstore.Execution
		c     execstore.Commit
		field string
	}{
		{"bad definition", withExe(func(e *execstore.Execution) { e.DefinitionID = "\xff" }), execstore.Commit{}, "Execution.DefinitionID"},
		{"bad parent", withExe(func(e *execstore.Execution) { e.ParentID = "\x00" }), execstore.Commit{}, "Execution.ParentID"},
		{"no status", withExe(func(e *execstore.Execution) { e.Status = "" }), execstore.Commit{}, "Execution.Status"},
		{"negative trace index", withExe(func(e *execstore.Execution) { e.TraceNext = -1 }), execstore.Commit{}, "Execution.TraceNext"},
		{"bad target", ok(), execstore.Commit{Emits: []execstore.Emit{{Event: []byte("e")}, {TargetID: "\xff", Event: []byte("e")}}}, "Commit.Emits[1].TargetID"},
		{"emit without an event", ok(), execstore.Commit{Emits: []execstore.Emit{{TargetID: "t"}}}, "Commit.Emits[0].Event"},
		{"long timer path", ok(), execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer(strings.Repeat("p", 1025))}}, "Commit.Timers[0].Path"},
		{"second timer", ok(), execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("a"), execstore.ScheduleTimer("b", time.Time{})}}, "Commit.Timers[1].FireAt"},
		{"bad event id", ok(), execstore.Commit{ProcessedEventID: strings.Repeat("e", 1025)}, "Commit.ProcessedEventID"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := *c.exe
			_, err := s.Commit(bg, c.exe, c.c)
			var ie *execstore.InvalidError
			require.ErrorAs(t, err, &ie)
			assert.ErrorIs(t, err, execstore.ErrInvalid)
			assert.Equal(t, c.field, ie.Field)
			assert.Equal(t, before, *c.exe)
			if c.c.Emits == nil && c.c.Timers == nil && c.c.ProcessedEventID == "" {
				assert.ErrorIs(t, s.Save(bg, c.exe), execstore.ErrInvalid, "Save checks as Commit does")
			}
		})
	}
	assert.Equal(t, state{exes: map[string]*execstore.Execution{"ok": nil}, outbox: []execstore.OutboxEntry{},
		spawns: []execstore.SpawnEntry{}, traces: map[string][]execstore.TraceStep{"ok": nil}, listing: []execstore.Summary{}},
		snapshot(t, s, "ok"), "bad input was written")
}

// Every other call refuses bad input with ErrInvalid naming the field the MongoDB store names.
func TestBadInput(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("x")
	mustCommit(t, s, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", unixAt(1))}})
	before := snapshot(t, s, "x")
	calls := map[string]struct {
		call  func() error
		field string
	}{
		"Load empty":         {func() error { _, err := s.Load(bg, ""); return err }, "id"},
		"LoadForEvent id":    {func() error { _, _, err := s.LoadForEvent(bg, "\x00", "e"); return err }, "id"},
		"LoadForEvent event": {func() error { _, _, err := s.LoadForEvent(bg, "x", ""); return err }, "eventID"},
		"IsProcessed id":     {func() error { _, err := s.IsProcessed(bg, "", "e"); return err }, "id"},
		"IsProcessed event":  {func() error { _, err := s.IsProcessed(bg, "x", "\xff"); return err }, "eventID"},
		"List negative limit": {func() error {
			_, err := s.List(bg, execstore.ListQuery{Limit: -1})
			return err
		}, "ListQuery.Limit"},
		"List bad status": {func() error {
			_, err := s.List(bg, execstore.ListQuery{Statuses: []execstore.Status{execstore.Done, "x"}})
			return err
		}, "ListQuery.Statuses[1]"},
		"List bad definition": {func() error {
			_, err := s.List(bg, execstore.ListQuery{DefinitionID: "\x00"})
			return err
		}, "ListQuery.DefinitionID"},
		"List garbage cursor": {func() error {
			_, err := s.List(bg, execstore.ListQuery{Cursor: "%%"})
			return err
		}, "ListQuery.Cursor"},
		"PendingOutbox limit": {func() error { _, err := s.PendingOutbox(bg, -1); return err }, "limit"},
		"PendingSpawns limit": {func() error { _, err := s.PendingSpawns(bg, -5); return err }, "limit"},
		"AckOutbox empty":     {func() error { return s.AckOutbox(bg, "", 1) }, "sourceID"},
		"AckSpawn empty":      {func() error { return s.AckSpawn(bg, "", 1) }, "parentID"},
		"DueTimers zero":      {func() error { _, err := s.DueTimers(bg, time.Time{}, 0); return err }, "now"},
		"DueTimers year 0":    {func() error { _, err := s.DueTimers(bg, time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), 0); return err }, "now"},
		"DueTimers limit":     {func() error { _, err := s.DueTimers(bg, unixAt(1), -1); return err }, "limit"},
		"DeleteTimer id":      {func() error { _, err := s.DeleteTimer(bg, "", "p", unixAt(1)); return err }, "id"},
		"DeleteTimer path":    {func() error { _, err := s.DeleteTimer(bg, "x", "", unixAt(1)); return err }, "path"},
		"DeleteTimer zero":    {func() error { _, err := s.DeleteTimer(bg, "x", "p", time.Time{}); return err }, "fireAt"},
		"DeleteTimers id": {func() error {
			return s.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "x", Path: "p", FireAt: unixAt(1)}, {Path: "p"}})
		}, "timers[1].ExecutionID"},
		"DeleteTimers path": {func() error {
			return s.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "x", FireAt: unixAt(1)}})
		}, "timers[0].Path"},
		"AppendTrace id":        {func() error { return s.AppendTrace(bg, "", map[string]any{}) }, "id"},
		"AppendTrace nil":       {func() error { return s.AppendTrace(bg, "x", nil) }, "step"},
		"AppendTrace encodable": {func() error { return s.AppendTrace(bg, "x", map[string]any{"f": func() {}}) }, "step"},
		"ReadTrace empty":       {func() error { _, err := s.ReadTrace(bg, ""); return err }, "id"},
	}
	for name, c := range calls {
		t.Run(name, func(t *testing.T) {
			err := c.call()
			require.ErrorIs(t, err, execstore.ErrInvalid)
			var ie *execstore.InvalidError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, c.field, ie.Field)
		})
	}
	assert.Equal(t, before, snapshot(t, s, "x"), "bad input changed the store")
}
