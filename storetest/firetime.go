package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// A fire time read back is within the precision execstore.TimerOp states, in UTC and without
// a monotonic clock reading: whole microseconds come back equal, other times less than one
// float64 step away, from year 1 to year 9999. Passed back to DeleteTimer it removes its
// timer; a time one microsecond off (a millisecond where a step is longer) removes nothing.
func fireTimePrecision(t *testing.T, s execstore.Store) {
	local := time.FixedZone("UTC+5", 5*3600)
	cases := []struct {
		path  string
		at    time.Time
		exact bool          // whole microseconds, 1698 to 2242: back equal
		bound time.Duration // else: back within this
	}{
		{"nanos", time.Date(2026, time.December, 1, 12, 0, 0, 123_456_789, time.UTC), false, 239 * time.Nanosecond},
		{"sub-ms", time.Date(2026, time.December, 1, 12, 0, 0, 250_500_000, time.UTC), true, 0},
		{"micros", time.Date(2031, time.July, 9, 3, 4, 5, 678_901_000, local), true, 0},
		{"millis", time.Date(2026, time.December, 1, 12, 0, 0, 1_000_000, time.UTC), true, 0},
		{"epoch", time.Unix(0, 0), true, 0},
		{"before epoch", time.Date(1969, time.July, 20, 20, 17, 40, 5_000, time.UTC), true, 0},
		{"2200", time.Date(2200, time.January, 1, 0, 0, 0, 999_999_000, time.UTC), true, 0},
		{"year 1", time.Date(1, time.March, 3, 3, 3, 3, 333_333_333, time.UTC), false, 8 * time.Microsecond},
		{"first", time.Date(1, time.January, 1, 0, 0, 1, 0, time.UTC), true, 0},
		{"year 9999", time.Date(9999, time.June, 1, 12, 34, 56, 789_012_345, time.UTC), false, 31 * time.Microsecond},
		{"last", time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC), true, 0},
	}
	var ops []execstore.TimerOp
	for _, c := range cases {
		ops = append(ops, execstore.ScheduleTimer(c.path, c.at))
	}
	e := newExe("e")
	_, err := s.Commit(bg, e, execstore.Commit{Timers: ops})
	require.NoError(t, err)
	got := map[string]execstore.DueTimer{}
	for _, d := range due(t, s, time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)) {
		got[d.Path] = d
	}
	require.Len(t, got, len(cases))
	for _, c := range cases {
		back := got[c.path].FireAt
		if c.exact {
			assert.True(t, c.at.Equal(back), "%s: %s read back as %s", c.path, c.at.Format(time.RFC3339Nano), back.Format(time.RFC3339Nano))
		} else {
			assert.LessOrEqual(t, back.Sub(c.at).Abs(), c.bound, "%s: %s read back as %s", c.path, c.at.Format(time.RFC3339Nano), back.Format(time.RFC3339Nano))
		}
		assert.Equal(t, time.UTC, back.Location(), c.path)
		assert.NotContains(t, back.String(), "m=", c.path)
	}
	// The same times read back again are the same values: a sweep's result is deterministic.
	again := due(t, s, time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC))
	for _, d := range again {
		assert.Equal(t, got[d.Path].FireAt, d.FireAt, d.Path)
	}
	last := time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)
	for _, c := range cases {
		off := time.Microsecond
		if y := c.at.Year(); y < 1698 || y > 2242 {
			off = time.Millisecond
		}
		beside := got[c.path].FireAt.Add(off)
		if beside.After(last) {
			beside = got[c.path].FireAt.Add(-off)
		}
		removed, err := s.DeleteTimer(bg, "e", c.path, beside)
		require.NoError(t, err)
		assert.False(t, removed, "%s: a time %v off removed the timer", c.path, off)
		removed, err = s.DeleteTimer(bg, "e", c.path, got[c.path].FireAt)
		require.NoError(t, err)
		assert.True(t, removed, "%s: its FireAt did not remove it", c.path)
	}
	assert.Empty(t, due(t, s, time.Date(9999, time.December, 31, 23, 59, 59, 0, time.UTC)))
}

// A timer is due from its FireAt as read back: DueTimers at that instant returns it, one
// nanosecond earlier it does not. DeleteTimers with the sweep's own result removes every
// timer, whatever the precision.
func dueFromFireAt(t *testing.T, s execstore.Store) {
	now := time.Now() // with a monotonic reading, which the store ignores
	require.Contains(t, now.String(), "m=")
	e := newExe("e")
	_, err := s.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("a", now.Add(-time.Hour)),
		execstore.ScheduleTimer("b", now.Add(-123_457*time.Nanosecond)),
		execstore.ScheduleTimer("c", now.Add(time.Hour)),
	}})
	require.NoError(t, err)
	d := due(t, s, now)
	require.Len(t, d, 2)
	assert.Equal(t, []string{"a", "b"}, []string{d[0].Path, d[1].Path})
	for _, x := range d {
		assert.Len(t, due(t, s, x.FireAt), map[string]int{"a": 1, "b": 2}[x.Path], "due at its own FireAt")
		assert.Len(t, due(t, s, x.FireAt.Add(-time.Nanosecond)), map[string]int{"a": 0, "b": 1}[x.Path], "due one nanosecond before its FireAt")
	}
	require.NoError(t, s.DeleteTimers(bg, d))
	left := due(t, s, now.Add(2*time.Hour))
	require.Len(t, left, 1)
	assert.Equal(t, "c", left[0].Path)
}

// The zero time.Time, and times outside years 1 to 9999, are refused with an
// *execstore.InvalidError naming the argument, before anything is written.
func fireTimeRefusals(t *testing.T, s execstore.Store) {
	past, future := time.Date(0, time.December, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, time.January, 1, 0, 0, 0, 0, time.UTC)
	calls := []struct {
		name, field string
		call        func() error
	}{
		{"DueTimers zero", "now", func() error { _, err := s.DueTimers(bg, time.Time{}, 0); return err }},
		{"DueTimers year 10000", "now", func() error { _, err := s.DueTimers(bg, future, 0); return err }},
		{"DueTimers year 0", "now", func() error { _, err := s.DueTimers(bg, past, 0); return err }},
		{"DeleteTimer zero", "fireAt", func() error { _, err := s.DeleteTimer(bg, "x", "p", time.Time{}); return err }},
		{"DeleteTimer year 10000", "fireAt", func() error { _, err := s.DeleteTimer(bg, "x", "p", future); return err }},
		{"DeleteTimers zero", "timers[1].FireAt", func() error {
			return s.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "x", Path: "p", FireAt: at(1)}, {ExecutionID: "x", Path: "p"}})
		}},
		{"Commit zero", "Commit.Timers[0].FireAt", func() error {
			_, err := s.Commit(bg, newExe("x"), execstore.Commit{Timers: []execstore.TimerOp{{Path: "p"}}})
			return err
		}},
		{"Commit year 0", "Commit.Timers[0].FireAt", func() error {
			_, err := s.Commit(bg, newExe("x"), execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", past)}})
			return err
		}},
	}
	for _, c := range calls {
		err := c.call()
		require.ErrorIs(t, err, execstore.ErrInvalid, c.name)
		var ie *execstore.InvalidError
		require.ErrorAs(t, err, &ie, c.name)
		assert.Equal(t, c.field, ie.Field, c.name)
		assert.True(t, strings.Contains(ie.Reason, "zero time") || strings.Contains(ie.Reason, "9999"), "%s: %s", c.name, ie.Reason)
	}
	got, err := s.Load(bg, "x")
	require.NoError(t, err)
	assert.Nil(t, got, "a refused commit was written")
}
