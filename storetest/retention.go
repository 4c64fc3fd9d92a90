package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// retainingBehaviours lists what Run checks of a store that implements execstore.Retaining.
var retainingBehaviours = []behaviour[execstore.Retaining]{
	{"ExpiredAreFinishedPastTheirCutoffHoldingNothing", expiredPastCutoffHoldingNothing},
	{"DeleteExpiredKeepsWhatACommitMovedOn", deleteExpiredGuarded},
	{"RetentionRefusesBadInput", retentionBadInput},
}

// RunRetaining checks a store that implements execstore.Retaining: which executions are past
// their retention, that a delete spares one a commit moved on since the read, the totals, and
// bad input refused. open must return a new, empty store each time it is called, and release
// it with t.Cleanup. Run runs it already for stores that are Retaining.
func RunRetaining(t *testing.T, open func(t *testing.T) execstore.Retaining) {
	t.Helper()
	runEach(t, retainingBehaviours, open)
}

// runRetaining runs RunRetaining when the stores open makes are Retaining.
func runRetaining(t *testing.T, open func(t *testing.T) execstore.Store) {
	t.Helper()
	runIf(t, open, RunRetaining)
}

// finish commits exe in status st, with c's other parts.
func finish(t *testing.T, s execstore.Store, exe *execstore.Execution, st execstore.Status, c execstore.Commit) []int64 {
	t.Helper()
	exe.Status = st
	return mustCommit(t, s, exe, c)
}

// expiredPastCutoffHoldingNothing: ExpiredIn returns the executions finished at or before
// their status's cutoff that hold nothing, within the partitions and the limit asked; not a running one, not one of a status without a cutoff, not one finished
// after its cutoff, not one holding a pending entry, a timer or a dead item.
func expiredPastCutoffHoldingNothing(t *testing.T, s execstore.Retaining) {
	done1, done2, failed, running := newExe("ret-done-1"), newExe("ret-done-2"), newExe("ret-failed"), newExe("ret-running")
	finish(t, s, done1, execstore.Done, execstore.Commit{})
	time.Sleep(3 * time.Millisecond)
	finish(t, s, done2, execstore.Done, execstore.Commit{})
	finish(t, s, failed, execstore.Failed, execstore.Commit{})
	mustCommit(t, s, running, execstore.Commit{})
	pending := newExe("ret-pending")
	seqs := finish(t, s, pending, execstore.Done, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("x")}}})
	timer := newExe("ret-timer")
	finish(t, s, timer, execstore.Done, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("p", time.Now().Add(time.Hour))}})
	cancelled := newExe("ret-cancelled")
	finish(t, s, cancelled, execstore.Cancelled, execstore.Commit{})
	// A timer armed, then cancelled by the commit that finishes: no timer is left, whatever
	// hint of it a store keeps.
	disarmed := newExe("ret-disarmed")
	mustCommit(t, s, disarmed, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", time.Now().Add(time.Hour))}})
	finish(t, s, disarmed, execstore.Done, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("p")}})
	cut := time.Now().Add(time.Second)

	all := allPartitions(s.Partitions())
	got, err := s.ExpiredIn(bg, all, map[execstore.Status]time.Time{execstore.Done: cut}, 0)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{done1.ID, done2.ID, disarmed.ID}, ids(got), "finished Done, holding nothing")
	require.Len(t, got, 3)
	var first execstore.FinishedExecution
	for _, e := range got {
		if e.ID == done1.ID {
			first = e
		}
	}
	assert.Equal(t, execstore.Done, first.Status)
	assert.Equal(t, done1.Version, first.Version)
	assert.False(t, first.FinishedAt.IsZero())

	got, err = s.ExpiredIn(bg, all, map[execstore.Status]time.Time{execstore.Done: first.FinishedAt}, 0)
	require.NoError(t, err)
	assert.Contains(t, ids(got), done1.ID, "a cutoff at the finish time itself")
	got, err = s.ExpiredIn(bg, all, map[execstore.Status]time.Time{execstore.Done: first.FinishedAt.Add(-time.Millisecond)}, 0)
	require.NoError(t, err)
	assert.Empty(t, got, "finished after the cutoff")

	cutoffs := map[execstore.Status]time.Time{execstore.Done: cut, execstore.Failed: cut, execstore.Cancelled: cut}
	got, err = s.ExpiredIn(bg, all, cutoffs, 0)
	require.NoError(t, err)
	assert.ElementsMatch(t, []string{done1.ID, done2.ID, disarmed.ID, failed.ID, cancelled.ID}, ids(got))
	got, err = s.ExpiredIn(bg, all, cutoffs, 1)
	require.NoError(t, err)
	require.Len(t, got, 1, "the limit")
	assert.Contains(t, []string{done1.ID, done2.ID, disarmed.ID, failed.ID, cancelled.ID}, got[0].ID)
	p := execstore.PartitionOf(failed.ID, s.Partitions())
	got, err = s.ExpiredIn(bg, []int{p}, cutoffs, 0)
	require.NoError(t, err)
	for _, e := range got {
		assert.Equal(t, p, execstore.PartitionOf(e.ID, s.Partitions()), "%s is not in partition %d", e.ID, p)
	}
	assert.Contains(t, ids(got), failed.ID)

	require.NoError(t, s.AckOutbox(bg, pending.ID, seqs[0]))
	got, err = s.ExpiredIn(bg, all, cutoffs, 0)
	require.NoError(t, err)
	assert.Contains(t, ids(got), pending.ID, "acked: it holds nothing now")
	assert.NotContains(t, ids(got), timer.ID, "its timer holds it")
	assert.NotContains(t, ids(got), running.ID)

	if dl, ok := s.(execstore.DeadLetters); ok {
		dead := newExe("ret-dead")
		seqs := finish(t, s, dead, execstore.Done, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("x")}}})
		_, ok, err := dl.Fail(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: dead.ID, Seq: seqs[0]},
			execstore.Failure{Error: "no", At: failAt, Dead: true})
		require.NoError(t, err)
		require.True(t, ok)
		got, err = s.ExpiredIn(bg, all, map[execstore.Status]time.Time{execstore.Done: time.Now().Add(time.Second)}, 0)
		require.NoError(t, err)
		assert.NotContains(t, ids(got), dead.ID, "its dead item holds it")
	}
}

// deleteExpiredGuarded: DeleteExpired deletes the executions as read, counts them in the
// totals, and keeps one a commit moved on after the read (running again, or finished again at
// another version): Load still finds it.
func deleteExpiredGuarded(t *testing.T, s execstore.Retaining) {
	gone, revived, again := newExe("del-gone"), newExe("del-revived"), newExe("del-again")
	for _, e := range []*execstore.Execution{gone, revived, again} {
		finish(t, s, e, execstore.Done, execstore.Commit{})
	}
	cutoffs := map[execstore.Status]time.Time{execstore.Done: time.Now().Add(time.Hour)}
	all := allPartitions(s.Partitions())
	expired, err := s.ExpiredIn(bg, all, cutoffs, 0)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{gone.ID, revived.ID, again.ID}, ids(expired))
	before, err := s.RetentionTotals(bg)
	require.NoError(t, err)

	finish(t, s, revived, execstore.Running, execstore.Commit{})
	finish(t, s, again, execstore.Done, execstore.Commit{})
	deleted, err := s.DeleteExpired(bg, expired, cutoffs)
	require.NoError(t, err)
	assert.Equal(t, map[execstore.Status]int64{execstore.Done: 1}, deleted)
	got, err := s.Load(bg, gone.ID)
	require.NoError(t, err)
	assert.Nil(t, got, "deleted")
	for _, e := range []*execstore.Execution{revived, again} {
		got, err := s.Load(bg, e.ID)
		require.NoError(t, err)
		require.NotNil(t, got, "%s was moved on after the read", e.ID)
		assert.Equal(t, e.Version, got.Version)
	}
	after, err := s.RetentionTotals(bg)
	require.NoError(t, err)
	assert.Equal(t, before.Deleted[execstore.Done]+1, after.Deleted[execstore.Done])
	assert.False(t, after.LastAt.IsZero())

	deleted, err = s.DeleteExpired(bg, expired, cutoffs)
	require.NoError(t, err)
	assert.Empty(t, deleted, "deleting again deletes nothing")
	_, err = s.Commit(bg, gone, execstore.Commit{})
	require.Error(t, err, "a commit of a deleted execution")
	assert.True(t, errors.Is(err, execstore.ErrConflict), "%v", err)
}

// retentionBadInput: a status that does not finish an execution and a partition out of range
// are ErrInvalid.
func retentionBadInput(t *testing.T, s execstore.Retaining) {
	_, err := s.ExpiredIn(bg, []int{0}, map[execstore.Status]time.Time{execstore.Running: time.Now()}, 0)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	_, err = s.ExpiredIn(bg, []int{s.Partitions()}, map[execstore.Status]time.Time{execstore.Done: time.Now()}, 0)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	_, err = s.DeleteExpired(bg, []execstore.FinishedExecution{{ID: ""}}, map[execstore.Status]time.Time{execstore.Done: time.Now()})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
}

func ids(expired []execstore.FinishedExecution) []string {
	out := make([]string, len(expired))
	for i, e := range expired {
		out[i] = e.ID
	}
	return slices.Clip(out)
}
