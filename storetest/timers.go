package storetest

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

func due(t *testing.T, s execstore.Store, now float64) []execstore.DueTimer {
	t.Helper()
	d, err := s.DueTimers(bg, now, 0)
	require.NoError(t, err)
	return d
}

// Schedule Fork.A@100: due at 150, not at 50; re-scheduled @200 it replaces the first; a
// cancel removes it.
func timers(t *testing.T, s execstore.Store) {
	e := newExe("e")
	require.NoError(t, s.Save(bg, e))
	_, err := s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Fork.A", 100)}})
	require.NoError(t, err)
	assert.Empty(t, due(t, s, 50))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: 100}}, due(t, s, 150))
	_, err = s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Fork.A", 200)}})
	require.NoError(t, err)
	assert.Empty(t, due(t, s, 150))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: 200}}, due(t, s, 250))
	_, err = s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("Fork.A")}})
	require.NoError(t, err)
	assert.Empty(t, due(t, s, 250))
}

// Timers come back earliest first across executions, and the last op on a path in a commit
// wins.
func timersOrderAndLastOpWins(t *testing.T, s execstore.Store) {
	a, b := newExe("a"), newExe("b")
	_, err := s.Commit(bg, a, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("x", 30), execstore.ScheduleTimer("y", 10), execstore.CancelTimer("y"),
		execstore.CancelTimer("z"), execstore.ScheduleTimer("z", 5)}})
	require.NoError(t, err)
	_, err = s.Commit(bg, b, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("x", 20)}})
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{
		{ExecutionID: "a", Path: "z", FireAt: 5},
		{ExecutionID: "b", Path: "x", FireAt: 20},
		{ExecutionID: "a", Path: "x", FireAt: 30},
	}, due(t, s, 100))
	d, err := s.DueTimers(bg, 100, 1)
	require.NoError(t, err)
	assert.Len(t, d, 1)
}

// Timer paths holding ".", "$", the fullwidth stop, "%", NUL or invalid UTF-8 round-trip and
// never collide.
func timerPaths(t *testing.T, s execstore.Store) {
	paths := []string{"Fork.A", "Fork．A", "$set", "a$b.c", "100%", "%2E", "nul\x00byte", "bad\xffutf8",
		"ünï．.$%", ".", "..", "$", "_id", "timers.x"}
	var ops []execstore.TimerOp
	for i, p := range paths {
		ops = append(ops, execstore.ScheduleTimer(p, float64(i+1)))
	}
	e := newExe("e")
	_, err := s.Commit(bg, e, execstore.Commit{Timers: ops})
	require.NoError(t, err)
	d := due(t, s, 1000)
	require.Len(t, d, len(paths))
	for i, p := range paths {
		assert.Equal(t, p, d[i].Path)
		assert.EqualValues(t, i+1, d[i].FireAt)
	}
	for i, p := range paths {
		removed, err := s.DeleteTimer(bg, "e", p, float64(i+1))
		require.NoError(t, err)
		assert.True(t, removed, p)
	}
	assert.Empty(t, due(t, s, 1000))
}

// DeleteTimer removes a timer only while it still fires at the time the sweep saw.
func guardedDelete(t *testing.T, s execstore.Store) {
	e := newExe("e")
	_, err := s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("S", 100)}})
	require.NoError(t, err)
	removed, err := s.DeleteTimer(bg, "e", "S", 99)
	require.NoError(t, err)
	assert.False(t, removed)
	assert.Len(t, due(t, s, 1000), 1)
	removed, err = s.DeleteTimer(bg, "e", "S", 100)
	require.NoError(t, err)
	assert.True(t, removed)
	assert.Empty(t, due(t, s, 1000))
	removed, err = s.DeleteTimer(bg, "unknown", "S", 100)
	require.NoError(t, err)
	assert.False(t, removed)
}

// A limited sweep returns exactly the earliest due timers across many executions, cancelled
// timers and all.
func dueTimersLimit(t *testing.T, s execstore.Store) {
	var all []execstore.DueTimer
	for i := range 20 {
		e := newExe(fmt.Sprintf("e%02d", i))
		at := float64((i*37)%20 + 1)
		ops := []execstore.TimerOp{execstore.ScheduleTimer("x", at)}
		if i%4 == 0 {
			ops = append(ops, execstore.ScheduleTimer("early", 0.5))
		}
		_, err := s.Commit(bg, e, execstore.Commit{Timers: ops})
		require.NoError(t, err)
		if i%4 == 0 {
			_, err = s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("early")}})
			require.NoError(t, err)
		}
		if at <= 15 {
			all = append(all, execstore.DueTimer{ExecutionID: e.ID, Path: "x", FireAt: at})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].FireAt < all[j].FireAt })
	for _, limit := range []int{1, 3, 7, len(all), 100} {
		d, err := s.DueTimers(bg, 15, limit)
		require.NoError(t, err)
		want := all
		if limit < len(all) {
			want = all[:limit]
		}
		assert.Equal(t, want, d, "limit %d", limit)
	}
}

// DeleteTimers removes a sweep's timers, still guarded by each fire time: a timer
// re-scheduled after the sweep read it survives.
func deleteTimers(t *testing.T, s execstore.Store) {
	for i := range 10 {
		e := newExe(fmt.Sprintf("e%d", i))
		_, err := s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{
			execstore.ScheduleTimer("a.b", float64(i)), execstore.ScheduleTimer("$c", 100)}})
		require.NoError(t, err)
	}
	swept := due(t, s, 50)
	require.Len(t, swept, 10)
	e3, err := s.Load(bg, "e3")
	require.NoError(t, err)
	_, err = s.Commit(bg, e3, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", 60)}})
	require.NoError(t, err)
	require.NoError(t, s.DeleteTimers(bg, swept))
	left := due(t, s, 1000)
	require.Len(t, left, 11)
	assert.Equal(t, execstore.DueTimer{ExecutionID: "e3", Path: "a.b", FireAt: 60}, left[0])
	require.NoError(t, s.DeleteTimers(bg, swept), "again: a no-op")
	require.NoError(t, s.DeleteTimers(bg, nil))
	err = s.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "x", Path: "p", FireAt: math.NaN()}})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
}
