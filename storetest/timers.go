package storetest

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// at is a fire time given in seconds since the Unix epoch, as the contract's examples give
// them.
func at(seconds float64) time.Time { return time.Unix(0, int64(seconds*1e9)).UTC() }

// unversioned returns d with every Version cleared, for the checks that compare timers by
// execution, path and fire time.
func unversioned(d []execstore.DueTimer) []execstore.DueTimer {
	out := make([]execstore.DueTimer, len(d))
	for i, t := range d {
		t.Version = 0
		out[i] = t
	}
	return out
}

func due(t *testing.T, s execstore.Store, now time.Time) []execstore.DueTimer {
	t.Helper()
	d, err := s.DueTimers(bg, now, 0)
	require.NoError(t, err)
	return d
}

// Schedule Fork.A@100: due at 150, not at 50, named by the version of the commit that armed
// it; re-scheduled @200 it replaces the first; a cancel removes it.
func timers(t *testing.T, s execstore.Store) {
	e := newExe("e")
	require.NoError(t, s.Save(bg, e))
	_, err := s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Fork.A", at(100))}})
	require.NoError(t, err)
	assert.Empty(t, due(t, s, at(50)))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: at(100), Version: 2}}, due(t, s, at(150)),
		"armed by the commit that created version 2")
	_, err = s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Fork.A", at(200))}})
	require.NoError(t, err)
	assert.Empty(t, due(t, s, at(150)))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: at(200), Version: 3}}, due(t, s, at(250)))
	_, err = s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("Fork.A")}})
	require.NoError(t, err)
	assert.Empty(t, due(t, s, at(250)))
}

// Timers come back earliest first across executions, and the last op on a path in a commit
// wins.
func timersOrderAndLastOpWins(t *testing.T, s execstore.Store) {
	a, b := newExe("a"), newExe("b")
	_, err := s.Commit(bg, a, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("x", at(30)), execstore.ScheduleTimer("y", at(10)), execstore.CancelTimer("y"),
		execstore.CancelTimer("z"), execstore.ScheduleTimer("z", at(5))}})
	require.NoError(t, err)
	_, err = s.Commit(bg, b, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("x", at(20))}})
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{
		{ExecutionID: "a", Path: "z", FireAt: at(5), Version: 1},
		{ExecutionID: "b", Path: "x", FireAt: at(20), Version: 1},
		{ExecutionID: "a", Path: "x", FireAt: at(30), Version: 1},
	}, due(t, s, at(100)))
	d, err := s.DueTimers(bg, at(100), 1)
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
		ops = append(ops, execstore.ScheduleTimer(p, at(float64(i+1))))
	}
	e := newExe("e")
	_, err := s.Commit(bg, e, execstore.Commit{Timers: ops})
	require.NoError(t, err)
	d := due(t, s, at(1000))
	require.Len(t, d, len(paths))
	for i, p := range paths {
		assert.Equal(t, p, d[i].Path)
		assert.Equal(t, at(float64(i+1)), d[i].FireAt)
	}
	for i, p := range paths {
		removed, err := s.DeleteTimer(bg, "e", p, at(float64(i+1)))
		require.NoError(t, err)
		assert.True(t, removed, p)
	}
	assert.Empty(t, due(t, s, at(1000)))
}

// DeleteTimer removes a timer only while it still fires at the time the sweep saw.
func guardedDelete(t *testing.T, s execstore.Store) {
	e := newExe("e")
	_, err := s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("S", at(100))}})
	require.NoError(t, err)
	removed, err := s.DeleteTimer(bg, "e", "S", at(99))
	require.NoError(t, err)
	assert.False(t, removed)
	assert.Len(t, due(t, s, at(1000)), 1)
	removed, err = s.DeleteTimer(bg, "e", "S", at(100))
	require.NoError(t, err)
	assert.True(t, removed)
	assert.Empty(t, due(t, s, at(1000)))
	removed, err = s.DeleteTimer(bg, "unknown", "S", at(100))
	require.NoError(t, err)
	assert.False(t, removed)
}

// A limited sweep returns exactly the earliest due timers across many executions, cancelled
// timers and all.
func dueTimersLimit(t *testing.T, s execstore.Store) {
	var all []execstore.DueTimer
	for i := range 20 {
		e := newExe(fmt.Sprintf("e%02d", i))
		fireAt := at(float64((i*37)%20 + 1))
		ops := []execstore.TimerOp{execstore.ScheduleTimer("x", fireAt)}
		if i%4 == 0 {
			ops = append(ops, execstore.ScheduleTimer("early", at(0.5)))
		}
		_, err := s.Commit(bg, e, execstore.Commit{Timers: ops})
		require.NoError(t, err)
		if i%4 == 0 {
			_, err = s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("early")}})
			require.NoError(t, err)
		}
		if !fireAt.After(at(15)) {
			all = append(all, execstore.DueTimer{ExecutionID: e.ID, Path: "x", FireAt: fireAt, Version: 1})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].FireAt.Before(all[j].FireAt) })
	for _, limit := range []int{1, 3, 7, len(all), 100} {
		d, err := s.DueTimers(bg, at(15), limit)
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
			execstore.ScheduleTimer("a.b", at(float64(i))), execstore.ScheduleTimer("$c", at(100))}})
		require.NoError(t, err)
	}
	swept := due(t, s, at(50))
	require.Len(t, swept, 10)
	e3, err := s.Load(bg, "e3")
	require.NoError(t, err)
	_, err = s.Commit(bg, e3, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", at(60))}})
	require.NoError(t, err)
	require.NoError(t, s.DeleteTimers(bg, swept))
	left := due(t, s, at(1000))
	require.Len(t, left, 11)
	assert.Equal(t, execstore.DueTimer{ExecutionID: "e3", Path: "a.b", FireAt: at(60), Version: 2}, left[0])
	require.NoError(t, s.DeleteTimers(bg, swept), "again: a no-op")
	require.NoError(t, s.DeleteTimers(bg, nil))
	err = s.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "x", Path: "p", FireAt: at(1)}, {ExecutionID: "x", Path: "p"}})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	var ie *execstore.InvalidError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "timers[1].FireAt", ie.Field)
}

// A timer re-armed to the fire time it had is another arming (DueTimer.Version): DeleteTimers
// of the timer a sweep read before the re-arm leaves the re-armed one, which is due and is
// removed by its own DueTimer; a DueTimer without a Version is matched by path and fire time
// alone.
func rearmSurvivesDelete(t *testing.T, s execstore.Store) {
	e := newExe("e")
	_, err := s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", at(100))}})
	require.NoError(t, err)
	swept := due(t, s, at(150))
	require.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "p", FireAt: at(100), Version: 1}}, swept)
	_, err = s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", at(100))}})
	require.NoError(t, err)
	require.NoError(t, s.DeleteTimers(bg, swept))
	again := due(t, s, at(150))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "p", FireAt: at(100), Version: 2}}, again,
		"the re-arm to the same fire time survives the delete of the timer before it")
	require.NoError(t, s.DeleteTimers(bg, again))
	assert.Empty(t, due(t, s, at(150)), "removed by its own arming")

	_, err = s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", at(100))}})
	require.NoError(t, err)
	require.NoError(t, s.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "e", Path: "p", FireAt: at(100)}}))
	assert.Empty(t, due(t, s, at(150)), "no Version: path and fire time alone")
	err = s.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "e", Path: "p", FireAt: at(100), Version: -1}})
	assert.ErrorIs(t, err, execstore.ErrInvalid, "a negative Version")
}
