package memstore_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
)

func dueAt(t *testing.T, s *memstore.Store, now float64) []execstore.DueTimer {
	t.Helper()
	d, err := s.DueTimers(bg, unixAt(now), 0)
	require.NoError(t, err)
	return d
}

// 10. Schedule, re-schedule, cancel.
func TestTimers(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	require.NoError(t, s.Save(bg, e))
	mustCommit(t, s, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Fork.A", unixAt(100))}})
	assert.Empty(t, dueAt(t, s, 50))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: unixAt(100), Version: 2}}, dueAt(t, s, 150))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: unixAt(100), Version: 2}}, dueAt(t, s, 100), "due at its fire time")
	mustCommit(t, s, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Fork.A", unixAt(200))}})
	assert.Empty(t, dueAt(t, s, 150))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: unixAt(200), Version: 3}}, dueAt(t, s, 250))
	mustCommit(t, s, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("Fork.A")}})
	assert.Empty(t, dueAt(t, s, 250))
	// A commit without timer ops leaves the timers alone.
	mustCommit(t, s, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("B", unixAt(1))}})
	mustCommit(t, s, e, execstore.Commit{})
	assert.Len(t, dueAt(t, s, 250), 1)
}

// Earliest first across executions, ties by execution id then path; the last op on a path
// wins; a limit keeps the earliest.
func TestTimersOrderAndLastOpWins(t *testing.T) {
	s := memstore.New(memstore.Options{})
	a, b := newExe("a"), newExe("b")
	mustCommit(t, s, a, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("x", unixAt(30)), execstore.ScheduleTimer("y", unixAt(10)), execstore.CancelTimer("y"),
		execstore.CancelTimer("z"), execstore.ScheduleTimer("z", unixAt(5)), execstore.ScheduleTimer("w", unixAt(1)),
		execstore.ScheduleTimer("w", unixAt(20)), execstore.ScheduleTimer("tie", unixAt(20))}})
	mustCommit(t, s, b, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("x", unixAt(20))}})
	want := []execstore.DueTimer{
		{ExecutionID: "a", Path: "z", FireAt: unixAt(5), Version: 1},
		{ExecutionID: "a", Path: "tie", FireAt: unixAt(20), Version: 1},
		{ExecutionID: "a", Path: "w", FireAt: unixAt(20), Version: 1},
		{ExecutionID: "b", Path: "x", FireAt: unixAt(20), Version: 1},
		{ExecutionID: "a", Path: "x", FireAt: unixAt(30), Version: 1},
	}
	assert.Equal(t, want, dueAt(t, s, 100))
	for limit := 1; limit <= 6; limit++ {
		d, err := s.DueTimers(bg, unixAt(100), limit)
		require.NoError(t, err)
		assert.Equal(t, want[:min(limit, len(want))], d, "limit %d", limit)
	}
	assert.Equal(t, want[:4], dueAt(t, s, 29))
}

// 11. Guarded delete: only the timer that still holds the fire time is removed.
func TestGuardedDelete(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("S", unixAt(100))}})
	for _, miss := range []struct {
		id, path string
		at       float64
	}{{"e", "S", 99}, {"e", "T", 100}, {"x", "S", 100}} {
		removed, err := s.DeleteTimer(bg, miss.id, miss.path, unixAt(miss.at))
		require.NoError(t, err)
		assert.False(t, removed, "%+v", miss)
	}
	assert.Len(t, dueAt(t, s, 1000), 1)
	removed, err := s.DeleteTimer(bg, "e", "S", unixAt(100))
	require.NoError(t, err)
	assert.True(t, removed)
	assert.Empty(t, dueAt(t, s, 1000))
	removed, err = s.DeleteTimer(bg, "e", "S", unixAt(100))
	require.NoError(t, err)
	assert.False(t, removed)
	got, err := s.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, 1, got.Version, "a delete moved the version")
}

// DeleteTimers removes a sweep's timers, each still guarded by its fire time.
func TestDeleteTimers(t *testing.T) {
	s := memstore.New(memstore.Options{})
	for i := range 10 {
		e := newExe(fmt.Sprintf("e%d", i))
		mustCommit(t, s, e, execstore.Commit{Timers: []execstore.TimerOp{
			execstore.ScheduleTimer("a.b", unixAt(float64(i))), execstore.ScheduleTimer("$c", unixAt(100))}})
	}
	due := dueAt(t, s, 50)
	require.Len(t, due, 10)
	// e3 re-schedules a.b after the sweep read it: its new timer must survive.
	e3, err := s.Load(bg, "e3")
	require.NoError(t, err)
	mustCommit(t, s, e3, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", unixAt(60))}})
	require.NoError(t, s.DeleteTimers(bg, due))
	left := dueAt(t, s, 1000)
	require.Len(t, left, 11)
	assert.Equal(t, execstore.DueTimer{ExecutionID: "e3", Path: "a.b", FireAt: unixAt(60), Version: 2}, left[0])
	require.NoError(t, s.DeleteTimers(bg, due)) // again: a no-op
	require.NoError(t, s.DeleteTimers(bg, nil))
	// One bad entry refuses them all.
	err = s.DeleteTimers(bg, []execstore.DueTimer{left[0], {ExecutionID: "x", Path: "p"}})
	var ie *execstore.InvalidError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "timers[1].FireAt", ie.Field)
	assert.Len(t, dueAt(t, s, 1000), 11)
}

// Fire times before the Unix epoch and fractions of a second are fire times like any other.
func TestTimerFireTimes(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("neg", unixAt(-5)), execstore.ScheduleTimer("frac", unixAt(0.25))}})
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "neg", FireAt: unixAt(-5), Version: 1}}, dueAt(t, s, 0))
	assert.Len(t, dueAt(t, s, 0.25), 2)
}

// unixAt is a fire time given in seconds since the Unix epoch.
func unixAt(seconds float64) time.Time { return time.Unix(0, int64(seconds*1e9)).UTC() }
