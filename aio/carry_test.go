package aio_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// carryHarness is a store whose acks wait a minute for a commit to carry them, with group
// commit on or off, and an execution "s" that emitted three entries.
func carryHarness(t *testing.T, grouped bool) (*harness, *execstore.Execution, []int64) {
	t.Helper()
	h := newHarness(t, grouping(grouped, aio.Options{AckWait: time.Minute}))
	exe := newExe("s")
	mustCommit(t, h.store, exe, execstore.Commit{})
	seqs, err := h.store.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{
		{TargetID: "t", Event: []byte("1")}, {TargetID: "t", Event: []byte("2")}, {TargetID: "t", Event: []byte("3")}}})
	require.NoError(t, err)
	return h, exe, seqs
}

// ackAsync starts AckOutbox of seq of exe and waits until it waits for a commit to carry it.
func ackAsync(t *testing.T, h *harness, ctx context.Context, id string, seq int64) <-chan error {
	t.Helper()
	before := h.store.AcksWaiting()
	done := make(chan error, 1)
	go func() { done <- h.store.AckOutbox(ctx, id, seq) }()
	require.Eventually(t, func() bool { return h.store.AcksWaiting() == before+1 }, 5*time.Second, time.Millisecond, "the ack waits")
	return done
}

// outboxOf returns the seqs of the entries stored in id's outbox, and its count.
func outboxOf(t *testing.T, h *harness, id string) ([]int64, int64) {
	t.Helper()
	doc := h.rawDoc(t, id)
	var seqs []int64
	if v, err := doc.LookupErr(ops.FieldOutbox); err == nil {
		elems, err := v.Document().Elements()
		require.NoError(t, err)
		for _, e := range elems {
			n, err := strconv.ParseInt(e.Key(), 10, 64)
			require.NoError(t, err)
			seqs = append(seqs, n)
		}
	}
	return seqs, rawInt(t, doc, "outbox_n")
}

func awaitAck(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the ack did not return")
		return nil
	}
}

func eachGrouping(t *testing.T, f func(t *testing.T, grouped bool)) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("group_commit=%v", grouped), func(t *testing.T) { f(t, grouped) })
	}
}

// An ack of an entry of s rides in s's next commit: the commit is the one write, it removes
// the entry and counts it off, and the ack returns nil once that commit won.
func TestAckRidesInTheSourcesNextCommit(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, seqs := carryHarness(t, grouped)
		done := ackAsync(t, h, bg, "s", seqs[0])
		h.cmds.reset()
		next, err := h.store.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("4")}}})
		require.NoError(t, err)
		require.NoError(t, awaitAck(t, done))
		assert.Equal(t, []string{"update"}, h.cmds.snapshot(), "the commit is the only write")
		stored, n := outboxOf(t, h, "s")
		assert.ElementsMatch(t, []int64{seqs[1], seqs[2], next[0]}, stored)
		assert.EqualValues(t, 3, n, "outbox_n counts the entries")
		assert.EqualValues(t, 1, h.store.Stats().AcksCarried)
		assert.EqualValues(t, 3, exe.Version)
	})
}

// An ack that no commit of its source takes within AckWait is written alone.
func TestAckNotCarriedWithinAckWaitIsWrittenAlone(t *testing.T) {
	h := newHarness(t, aio.Options{AckWait: 30 * time.Millisecond})
	exe := newExe("s")
	seqs, err := h.store.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("1")}}})
	require.NoError(t, err)
	require.NoError(t, h.store.AckOutbox(bg, "s", seqs[0]))
	stored, n := outboxOf(t, h, "s")
	assert.Empty(t, stored)
	assert.Zero(t, n)
	assert.Zero(t, h.store.Stats().AcksCarried)
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
}

// An ack taken by a commit that loses (a stale version) is no ack: it is written alone, and
// the commit's conflict is the caller's, as it would be without the ack.
func TestAckTakenByACommitThatLostIsWrittenAlone(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, seqs := carryHarness(t, grouped)
		stale := *exe
		mustCommit(t, h.store, exe, execstore.Commit{}) // moves the version past stale's
		done := ackAsync(t, h, bg, "s", seqs[0])
		_, err := h.store.Commit(bg, &stale, execstore.Commit{})
		var conflict *execstore.ConflictError
		require.ErrorAs(t, err, &conflict)
		assert.Equal(t, stale.Version, conflict.Expected)
		require.NoError(t, awaitAck(t, done))
		stored, n := outboxOf(t, h, "s")
		assert.ElementsMatch(t, []int64{seqs[1], seqs[2]}, stored)
		assert.EqualValues(t, 2, n)
		assert.Zero(t, h.store.Stats().AcksCarried)
	})
}

// Another writer removes the entry (another relay's ack, after a hand-over) between the ack
// starting to wait and the commit that takes it: the commit's guard on the entry misses, the
// commit is sent again without the ack and wins, the count is lowered once, not twice, and
// the ack returns nil (its entry is gone).
func TestAckWhoseEntryAnotherWriterRemovedRidesNot(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, seqs := carryHarness(t, grouped)
		done := ackAsync(t, h, bg, "s", seqs[0])
		filter, update := ops.AckOutboxCommand("s", seqs[0])
		res, err := h.db.Collection(ops.ExecutionsCollection).UpdateOne(bg, filter, update)
		require.NoError(t, err)
		require.EqualValues(t, 1, res.ModifiedCount)
		_, err = h.store.Commit(bg, exe, execstore.Commit{})
		require.NoError(t, err)
		require.NoError(t, awaitAck(t, done))
		stored, n := outboxOf(t, h, "s")
		assert.ElementsMatch(t, []int64{seqs[1], seqs[2]}, stored)
		assert.EqualValues(t, 2, n, "outbox_n lowered once")
		assert.EqualValues(t, 3, rawInt(t, h.rawDoc(t, "s"), ops.FieldVersion))
	})
}

// Close writes the acks that wait for a commit before it returns.
func TestCloseWritesTheWaitingAcks(t *testing.T) {
	h, _, seqs := carryHarness(t, true)
	done := ackAsync(t, h, bg, "s", seqs[1])
	require.NoError(t, h.store.Close(bg))
	require.NoError(t, awaitAck(t, done))
	stored, n := outboxOf(t, h, "s")
	assert.ElementsMatch(t, []int64{seqs[0], seqs[2]}, stored)
	assert.EqualValues(t, 2, n)
}

// An ack whose context ends while it waits writes nothing and returns the context's error;
// a later commit of its source does not carry it.
func TestAckCancelledWhileItWaitsWritesNothing(t *testing.T) {
	h, exe, seqs := carryHarness(t, false)
	ctx, cancel := context.WithCancel(bg)
	done := ackAsync(t, h, ctx, "s", seqs[0])
	h.cmds.reset()
	cancel()
	err := awaitAck(t, done)
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
	assert.Empty(t, h.cmds.snapshot(), "nothing sent")
	mustCommit(t, h.store, exe, execstore.Commit{})
	stored, n := outboxOf(t, h, "s")
	assert.ElementsMatch(t, seqs, stored)
	assert.EqualValues(t, 3, n)
	assert.Zero(t, h.store.AcksWaiting())
}

// timerCarryHarness is a store whose acks and timer deletes wait a minute for a commit, and
// an execution "x" with a due timer "a".
func timerCarryHarness(t *testing.T, grouped bool) (*harness, *execstore.Execution, execstore.DueTimer) {
	t.Helper()
	h := newHarness(t, grouping(grouped, aio.Options{AckWait: time.Minute}))
	exe := newExe("x")
	fireAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	mustCommit(t, h.store, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", fireAt)}})
	due, err := h.store.DueTimers(bg, time.Now(), 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	return h, exe, due[0]
}

// deleteAsync starts DeleteTimers of timers and waits until they wait for a commit.
func deleteAsync(t *testing.T, h *harness, timers ...execstore.DueTimer) <-chan error {
	t.Helper()
	before := h.store.AcksWaiting()
	done := make(chan error, 1)
	go func() { done <- h.store.DeleteTimers(bg, timers) }()
	require.Eventually(t, func() bool { return h.store.AcksWaiting() == before+len(timers) }, 5*time.Second, time.Millisecond, "the deletes wait")
	return done
}

// A fired timer's delete rides in its execution's next commit: one write, the timer gone.
func TestTimerDeleteRidesInTheExecutionsNextCommit(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, due := timerCarryHarness(t, grouped)
		done := deleteAsync(t, h, due)
		h.cmds.reset()
		mustCommit(t, h.store, exe, execstore.Commit{ProcessedEventID: "e"})
		require.NoError(t, awaitAck(t, done))
		assert.Equal(t, []string{"update"}, h.cmds.snapshot(), "the commit is the only write")
		assert.Empty(t, timersOf(t, h, "x"))
		assert.EqualValues(t, 1, h.store.Stats().TimersCarried)
	})
}

// A commit that re-arms the fired timer's path ends the delete with its own operation: the
// new timer stands. One that cancels it removes it.
func TestTimerDeleteEndedByTheCommitsOwnOperation(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, due := timerCarryHarness(t, grouped)
		done := deleteAsync(t, h, due)
		later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		mustCommit(t, h.store, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", later)}})
		require.NoError(t, awaitAck(t, done))
		assert.Equal(t, map[string]float64{"a": contract.StoredTime(later)}, timersOf(t, h, "x"), "the re-arm stands")

		due = execstore.DueTimer{ExecutionID: "x", Path: "a", FireAt: later}
		done = deleteAsync(t, h, due)
		mustCommit(t, h.store, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("a")}})
		require.NoError(t, awaitAck(t, done))
		assert.Empty(t, timersOf(t, h, "x"))
	})
}

// Another writer re-arms the timer (a commit through another store) before the commit that
// takes the delete: that commit's guard on the fire time misses, it is sent again without
// the delete and wins, and the re-armed timer stands.
func TestTimerDeleteWhoseTimerWasReArmedRidesNot(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, due := timerCarryHarness(t, grouped)
		other := h.reopen(t, aio.Options{DisableAckCarrying: true})
		later := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
		done := deleteAsync(t, h, due)
		mustCommit(t, other, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", later)}})
		mustCommit(t, h.store, exe, execstore.Commit{})
		require.NoError(t, awaitAck(t, done))
		assert.Equal(t, map[string]float64{"a": contract.StoredTime(later)}, timersOf(t, h, "x"), "the re-arm stands")
		assert.EqualValues(t, 3, rawInt(t, h.rawDoc(t, "x"), ops.FieldVersion))
		assert.Zero(t, h.store.Stats().TimersCarried)
	})
}

// A delete no commit takes within AckWait is written alone.
func TestTimerDeleteNotCarriedWithinAckWaitIsWrittenAlone(t *testing.T) {
	h := newHarness(t, aio.Options{AckWait: 20 * time.Millisecond})
	exe := newExe("x")
	mustCommit(t, h.store, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", time.Now().Add(-time.Second))}})
	due, err := h.store.DueTimers(bg, time.Now(), 0)
	require.NoError(t, err)
	require.NoError(t, h.store.DeleteTimers(bg, due))
	assert.Empty(t, timersOf(t, h, "x"))
	assert.Zero(t, h.store.Stats().TimersCarried)
}

// Two acks of one entry waiting together (a redelivery, two relays after a hand-over): the
// commit carries one, the other goes alone, and the commit is not refused for a path
// updated twice; the count goes down once.
func TestTwoAcksOfOneEntryRideOnce(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, seqs := carryHarness(t, grouped)
		first := ackAsync(t, h, bg, "s", seqs[0])
		second := ackAsync(t, h, bg, "s", seqs[0])
		mustCommit(t, h.store, exe, execstore.Commit{})
		require.NoError(t, awaitAck(t, first))
		require.NoError(t, awaitAck(t, second))
		stored, n := outboxOf(t, h, "s")
		assert.ElementsMatch(t, []int64{seqs[1], seqs[2]}, stored)
		assert.EqualValues(t, 2, n)
	})
}

// A DeleteTimers whose context ends while its timers wait for a commit writes nothing and
// returns the context's error.
func TestTimerDeleteWhoseContextEndsWritesNothing(t *testing.T) {
	h, _, due := timerCarryHarness(t, false)
	ctx, cancel := context.WithCancel(bg)
	done := make(chan error, 1)
	before := h.store.AcksWaiting()
	go func() {
		done <- h.store.DeleteTimers(ctx, []execstore.DueTimer{due, {ExecutionID: "y", Path: "a", FireAt: due.FireAt}})
	}()
	require.Eventually(t, func() bool { return h.store.AcksWaiting() == before+2 }, 5*time.Second, time.Millisecond)
	cancel()
	err := awaitAck(t, done)
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, timersOf(t, h, "x"), "a", "nothing was sent")
}

// An ack waits for its source's commit while the store keeps committing other executions,
// and stops waiting once the store has sent no commit for a tenth of AckWait: it is written
// alone then, long before AckWait ran out.
func TestAckStopsWaitingOnceTheStoreIsIdle(t *testing.T) {
	h := newHarness(t, aio.Options{AckWait: 20 * time.Second}) // idle after 2s
	s, o := newExe("s"), newExe("o")
	seqs, err := h.store.Commit(bg, s, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("1")}, {TargetID: "t", Event: []byte("2")}}})
	require.NoError(t, err)
	mustCommit(t, h.store, o, execstore.Commit{})

	// Commits of o one after another for a second: the ack of s waits all along, and s's
	// commit carries it.
	done := ackAsync(t, h, bg, "s", seqs[0])
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		mustCommit(t, h.store, o, execstore.Commit{})
	}
	assert.EqualValues(t, 1, h.store.AcksWaiting(), "the ack still waits while the store commits")
	mustCommit(t, h.store, s, execstore.Commit{})
	require.NoError(t, awaitAck(t, done))
	assert.EqualValues(t, 1, h.store.Stats().AcksCarried)

	// No commit after it: the store is idle, and the next ack goes out alone after about 2s,
	// well before AckWait ran out.
	start := time.Now()
	done = ackAsync(t, h, bg, "s", seqs[1])
	require.NoError(t, awaitAck(t, done))
	assert.Less(t, time.Since(start), 10*time.Second, "the ack waited for AckWait though the store was idle")
	assert.EqualValues(t, 1, h.store.Stats().AcksCarried, "written alone")
	stored, n := outboxOf(t, h, "s")
	assert.Empty(t, stored)
	assert.Zero(t, n)
}

// A store whose commit waits for the server's answer is not idle: its callers commit again
// once answered. So an ack keeps waiting past a tenth of AckWait while a grouped commit is
// in flight, and its source's commit carries it once the answers come back. (Counted from
// the last commit sent alone, it went out alone, into the same stalled server.)
func TestAckWaitsWhileACommitIsInFlight(t *testing.T) {
	proxy, uri := proxied(t)
	h := newHarness(t, aio.Options{})
	s, err := aio.Open(bg, uri, aio.Options{DisableRemoteWakes: proxiedStall, AckWait: 40 * time.Second, // idle after 4s
		Connection: server.Connection{Database: h.opts.Database}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close(bg) })
	src, o := newExe("s"), newExe("o")
	seqs, err := s.Commit(bg, src, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("1")}}})
	require.NoError(t, err)
	mustCommit(t, s, o, execstore.Commit{})

	done := make(chan error, 1)
	go func() { done <- s.AckOutbox(bg, "s", seqs[0]) }()
	require.Eventually(t, func() bool { return s.AcksWaiting() == 1 }, 5*time.Second, time.Millisecond, "the ack waits")
	proxy.AnswersStalled.Store(true)
	inFlight := s.CommitAsync(bg, o, execstore.Commit{}) // applied; its answer held
	// Past the idle gap of 4s, short of AckWait. The ack's next look after it comes 4s after
	// the first (the group commit was busy then): the source's commit below has about 3s to
	// carry the ack before it.
	time.Sleep(5 * time.Second)
	assert.Equal(t, 1, s.AcksWaiting(), "the ack went alone while a commit was in flight")

	proxy.AnswersStalled.Store(false)
	_, err = inFlight.Wait(bg)
	require.NoError(t, err)
	mustCommit(t, s, src, execstore.Commit{})
	require.NoError(t, awaitAck(t, done))
	assert.EqualValues(t, 1, s.Stats().AcksCarried, "the source's commit carried the ack")
	stored, n := outboxOf(t, h, "s")
	assert.Empty(t, stored)
	assert.Zero(t, n)
}

// What waits for one source leaves together once a wait runs out: two acks and a fired
// timer's delete of s, none carried (no commit comes), go out in one bulk write, and on the
// MongoDB formulation as one statement guarded by all three, which rewrites s once (in its
// two forms, since the timer is s's last: the first applies, and removes the hint too). On
// the FerretDB formulation they are statements of their own, in the same write.
func TestASourcesRemovalsGoAloneTogether(t *testing.T) {
	for _, profile := range []server.Profile{server.MongoDB, server.FerretDB} {
		t.Run(string(profile), func(t *testing.T) {
			// The acks and the delete must all wait before the store is idle, a tenth of
			// AckWait after its last commit: 200 ms was once too short on a busy machine.
			h := newHarness(t, aio.Options{AckWait: 30 * time.Second, Connection: server.Connection{Profile: profile}})
			exe := newExe("s")
			mustCommit(t, h.store, exe, execstore.Commit{})
			seqs, err := h.store.Commit(bg, exe, execstore.Commit{
				Emits:  []execstore.Emit{{TargetID: "t", Event: []byte("1")}, {TargetID: "t", Event: []byte("2")}},
				Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", time.Now().Add(-time.Second))}})
			require.NoError(t, err)
			due, err := h.store.DueTimers(bg, time.Now(), 0)
			require.NoError(t, err)
			require.Len(t, due, 1)
			mustCommit(t, h.store, exe, execstore.Commit{}) // the idle wait counts from here

			h.cmds.reset()
			first := ackAsync(t, h, bg, "s", seqs[0])
			second := ackAsync(t, h, bg, "s", seqs[1])
			deleted := make(chan error, 1)
			go func() { deleted <- h.store.DeleteTimers(bg, due) }()
			require.Eventually(t, func() bool { return h.store.AcksWaiting() == 3 }, 5*time.Second, time.Millisecond, "the delete waits with the acks")
			require.NoError(t, awaitAck(t, first))
			require.NoError(t, awaitAck(t, second))
			require.NoError(t, awaitAck(t, deleted))

			stored, n := outboxOf(t, h, "s")
			assert.Empty(t, stored)
			assert.Zero(t, n, "the count went down by two")
			assert.Empty(t, timersOf(t, h, "s"))
			assert.Equal(t, []string{"update"}, h.cmds.snapshot(), "one write")
			qs, _ := updateStatements(t, h.cmds)
			if profile == server.MongoDB {
				// One statement in its two forms: s's last timer, then beside another.
				require.Len(t, qs, 2, "one statement, in two forms")
				elems, err := qs[0].Elements()
				require.NoError(t, err)
				assert.Len(t, elems, 5, "_id and the three guards, the timer's as the only one, with its arming version")
				elems, err = qs[1].Elements()
				require.NoError(t, err)
				assert.Len(t, elems, 6, "_id, the three guards (the timer's with its arming version) and another timer")
				_, err = h.rawDoc(t, "s").LookupErr("timer_min")
				assert.Error(t, err, "the last timer's delete left the hint")
			} else {
				assert.Len(t, qs, 3)
			}
		})
	}
}
