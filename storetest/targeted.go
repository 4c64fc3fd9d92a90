package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// targetedBehaviours lists what Run checks of a store that implements execstore.Targeted.
var targetedBehaviours = []behaviour[execstore.Targeted]{
	{"TargetedReadsAreTheWholeReadRestricted", targetedReads},
	{"BadTargetsAreInvalid", badTargets},
	{"NoTargetsReadNothing", noTargets},
}

// RunTargeted checks a store that implements execstore.Targeted: that a read of some
// executions is the whole read restricted to them, in the same order, with and without a
// limit; that an invalid id or too many of them are refused with execstore.ErrInvalid; and
// that a read of no execution returns nothing. open must return a new, empty store each time
// it is called, and release it with t.Cleanup. Run runs it already for stores that are
// Targeted.
func RunTargeted(t *testing.T, open func(t *testing.T) execstore.Targeted) {
	t.Helper()
	runEach(t, targetedBehaviours, open)
}

// runTargeted runs RunTargeted when the stores open makes are Targeted.
func runTargeted(t *testing.T, open func(t *testing.T) execstore.Store) {
	t.Helper()
	runIf(t, open, RunTargeted)
}

// targetedReads commits entries and timers on several executions, in interleaved rounds,
// with one execution's timers all fired and another's entries all acked. Then each read of
// some executions returns exactly the whole read's result restricted to them, in the same
// order, with and without a limit. An id named twice counts once, and an id of no execution
// matches nothing.
func targetedReads(t *testing.T, s execstore.Targeted) {
	exes := commitInRounds(t, s, "target", 8)
	due, err := s.DueTimers(bg, at(1000), 0)
	require.NoError(t, err)
	var fired []execstore.DueTimer
	for _, d := range due {
		if d.ExecutionID == exes[2].ID {
			fired = append(fired, d)
		}
	}
	require.NoError(t, s.DeleteTimers(bg, fired))

	allOutbox, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	allDue, err := s.DueTimers(bg, at(1000), 0)
	require.NoError(t, err)
	require.Len(t, allOutbox, 3*2*(len(exes)-1))
	require.Len(t, allDue, 3*(len(exes)-1))
	allDueAt120, err := s.DueTimers(bg, at(120), 0)
	require.NoError(t, err)

	id := func(i int) string { return exes[i].ID }
	for _, ids := range [][]string{
		{id(0)}, {id(1)}, {id(2)},
		{id(5), id(3), id(5)}, // out of order, twice
		{id(0), id(1), id(2), id(3), "no-such-execution"},
		{id(0), id(1), id(2), id(3), id(4), id(5), id(6), id(7)},
	} {
		in := map[string]bool{}
		for _, x := range ids {
			in[x] = true
		}
		wantOutbox := keep(allOutbox, func(e execstore.OutboxEntry) bool { return in[e.SourceID] })
		wantDue := keep(allDue, func(d execstore.DueTimer) bool { return in[d.ExecutionID] })
		wantDueAt120 := keep(allDueAt120, func(d execstore.DueTimer) bool { return in[d.ExecutionID] })
		for _, limit := range []int{0, 1, 3} {
			gotOutbox, err := s.PendingOutboxOf(bg, ids, limit)
			require.NoError(t, err)
			sameScan(t, limited(wantOutbox, limit), gotOutbox, "outbox of %v, limit %d", ids, limit)
			gotDue, err := s.DueTimersOf(bg, ids, at(1000), limit)
			require.NoError(t, err)
			sameScan(t, limited(wantDue, limit), gotDue, "timers of %v, limit %d", ids, limit)
			gotDue, err = s.DueTimersOf(bg, ids, at(120), limit)
			require.NoError(t, err)
			sameScan(t, limited(wantDueAt120, limit), gotDue, "timers of %v due at 120, limit %d", ids, limit)
		}
	}
}

// An invalid id, more than execstore.MaxTargetedIDs ids, or a negative limit are refused
// with ErrInvalid by every targeted read.
func badTargets(t *testing.T, s execstore.Targeted) {
	tooMany := make([]string, execstore.MaxTargetedIDs+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("x", i)
	}
	for _, ids := range [][]string{{""}, {"a", ""}, {strings.Repeat("x", execstore.MaxIDBytes+1)}, {"a\x00b"}, tooMany} {
		_, err := s.PendingOutboxOf(bg, ids, 0)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "outbox of %d ids", len(ids))
		_, err = s.DueTimersOf(bg, ids, at(1000), 0)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "timers of %d ids", len(ids))
	}
	_, err := s.PendingOutboxOf(bg, []string{"a"}, -1)
	assert.ErrorIs(t, err, execstore.ErrInvalid, "a negative limit")
	_, err = s.DueTimersOf(bg, []string{"a"}, at(1000), -1)
	assert.ErrorIs(t, err, execstore.ErrInvalid, "a negative limit")
}

// A read of no execution returns nothing, even with entries and due timers in the store.
func noTargets(t *testing.T, s execstore.Targeted) {
	e := newExe("none")
	_, err := s.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", at(10))}})
	require.NoError(t, err)
	for _, ids := range [][]string{nil, {}} {
		o, err := s.PendingOutboxOf(bg, ids, 0)
		assert.NoError(t, err)
		assert.Empty(t, o)
		d, err := s.DueTimersOf(bg, ids, at(1000), 0)
		assert.NoError(t, err)
		assert.Empty(t, d)
	}
	o, err := s.PendingOutboxOf(bg, []string{e.ID}, 0)
	require.NoError(t, err)
	require.Len(t, o, 1)

	// One execution with nothing to return: its entries acked, its timer not due.
	require.NoError(t, s.AckOutbox(bg, e.ID, o[0].Seq))
	later := newExe("later")
	_, err = s.Commit(bg, later, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", at(5000))}})
	require.NoError(t, err)
	for _, id := range []string{e.ID, later.ID} {
		o, err := s.PendingOutboxOf(bg, []string{id}, 0)
		assert.NoError(t, err)
		assert.Empty(t, o, "outbox of %s", id)
	}
	d, err := s.DueTimersOf(bg, []string{later.ID}, at(1000), 0)
	assert.NoError(t, err)
	assert.Empty(t, d, "a timer not due")
	d, err = s.DueTimersOf(bg, []string{later.ID}, at(5000), 0)
	assert.NoError(t, err)
	assert.Len(t, d, 1, "the timer due")
}
