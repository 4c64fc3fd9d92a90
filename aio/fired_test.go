package aio_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// firedHarness is a store, with group commit on or off, and an execution "x" with two due
// timers, "a" and "b". It returns the fired timer "a" as a sweeper hands it to its handler.
func firedHarness(t *testing.T, grouped bool) (*harness, *execstore.Execution, *wake.FiredTimer) {
	t.Helper()
	h := newHarness(t, grouping(grouped, aio.Options{}))
	exe := newExe("x")
	fireAt := time.Now().Add(-time.Minute).UTC().Truncate(time.Microsecond)
	mustCommit(t, h.store, exe, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("a", fireAt), execstore.ScheduleTimer("b", fireAt.Add(time.Second))}})
	due, err := h.store.DueTimers(bg, time.Now(), 0)
	require.NoError(t, err)
	require.Len(t, due, 2)
	require.Equal(t, "a", due[0].Path)
	return h, exe, wake.NewFiredTimer(due[0], wake.Of(h.store))
}

// timersOf returns the fire times stored under id's timers, by path.
func timersOf(t *testing.T, h *harness, id string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	v, err := h.rawDoc(t, id).LookupErr(ops.FieldTimers)
	if err != nil {
		return out
	}
	elems, err := v.Document().Elements()
	require.NoError(t, err)
	for _, e := range elems {
		out[e.Key()] = e.Value().Double()
	}
	return out
}

// A commit made with the handler's context of a fired timer of its execution removes the
// timer in its own write, the one command; restoring it puts it back, once.
func TestFiredTimerRidesInItsHandlersCommit(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, fired := firedHarness(t, grouped)
		b := timersOf(t, h, "x")["b"]
		h.cmds.reset()
		_, err := h.store.Commit(wake.WithFiredTimer(bg, fired), exe, execstore.Commit{ProcessedEventID: "timer-a"})
		require.NoError(t, err)
		assert.Equal(t, []string{"update"}, h.cmds.snapshot(), "the commit is the only write")
		assert.Equal(t, map[string]float64{"b": b}, timersOf(t, h, "x"), "a is gone, b is not")
		assert.EqualValues(t, 1, h.store.Stats().TimersCarried)

		removed, restore := fired.Finish(bg)
		require.True(t, removed)
		require.NotNil(t, restore)
		ok, err := restore(bg)
		require.NoError(t, err)
		assert.True(t, ok)
		assert.Equal(t, map[string]float64{"a": contract.StoredTime(fired.Timer.FireAt), "b": b}, timersOf(t, h, "x"))
		due, err := h.store.DueTimers(bg, time.Now(), 0)
		require.NoError(t, err)
		assert.Len(t, due, 2, "the restored timer is due again")
		ok, err = restore(bg)
		require.NoError(t, err)
		assert.False(t, ok, "restored once")
	})
}

// A commit that re-arms or cancels the fired timer's path decides the timer's fate: it does
// not carry the removal.
func TestFiredTimerReArmedOrCancelledByTheCommitIsNotCarried(t *testing.T) {
	for name, op := range map[string]execstore.TimerOp{
		"re-arm": execstore.ScheduleTimer("a", time.Now().Add(time.Hour)),
		"cancel": execstore.CancelTimer("a"),
	} {
		t.Run(name, func(t *testing.T) {
			h, exe, fired := firedHarness(t, false)
			_, err := h.store.Commit(wake.WithFiredTimer(bg, fired), exe, execstore.Commit{Timers: []execstore.TimerOp{op}})
			require.NoError(t, err)
			a, armed := timersOf(t, h, "x")["a"]
			if op.Cancel {
				assert.False(t, armed)
			} else {
				assert.Equal(t, contract.StoredTime(op.FireAt), a, "the re-arm stands")
			}
			removed, restore := fired.Finish(bg)
			assert.False(t, removed)
			assert.Nil(t, restore)
			assert.Zero(t, h.store.Stats().TimersCarried)
		})
	}
}

// Another writer deletes the timer (another sweeper, after a hand-over) before the handler's
// commit: the commit's guard on the timer misses, and it is sent again without the removal
// and wins. It did not remove the timer, so there is nothing to restore.
func TestFiredTimerDeletedByAnotherWriterRidesNot(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, fired := firedHarness(t, grouped)
		filter, update := ops.DeleteTimerCommand("x", "a", fired.Timer.FireAt, fired.Timer.Version)
		res, err := h.db.Collection(ops.ExecutionsCollection).UpdateOne(bg, filter, update)
		require.NoError(t, err)
		require.EqualValues(t, 1, res.ModifiedCount)
		_, err = h.store.Commit(wake.WithFiredTimer(bg, fired), exe, execstore.Commit{})
		require.NoError(t, err)
		assert.EqualValues(t, 2, exe.Version)
		assert.EqualValues(t, 2, rawInt(t, h.rawDoc(t, "x"), ops.FieldVersion))
		removed, restore := fired.Finish(bg)
		assert.False(t, removed)
		assert.Nil(t, restore)
		assert.Zero(t, h.store.Stats().TimersCarried)
	})
}

// A commit that carried the removal and lost (a stale version) is no removal; the handler's
// next commit carries it.
func TestFiredTimerTakenByACommitThatLostIsCarriedByTheNext(t *testing.T) {
	eachGrouping(t, func(t *testing.T, grouped bool) {
		h, exe, fired := firedHarness(t, grouped)
		stale := *exe
		mustCommit(t, h.store, exe, execstore.Commit{})
		ctx := wake.WithFiredTimer(bg, fired)
		_, err := h.store.Commit(ctx, &stale, execstore.Commit{})
		var conflict *execstore.ConflictError
		require.ErrorAs(t, err, &conflict)
		assert.Contains(t, timersOf(t, h, "x"), "a", "the lost commit removed nothing")
		_, err = h.store.Commit(ctx, exe, execstore.Commit{})
		require.NoError(t, err)
		assert.NotContains(t, timersOf(t, h, "x"), "a")
		removed, _ := fired.Finish(bg)
		assert.True(t, removed)
	})
}

// Once the execution committed again after the commit that removed the timer, the restore
// changes nothing: that later commit was made on the state without the timer.
func TestFiredTimerIsNotRestoredOverALaterCommit(t *testing.T) {
	h, exe, fired := firedHarness(t, false)
	_, err := h.store.Commit(wake.WithFiredTimer(bg, fired), exe, execstore.Commit{})
	require.NoError(t, err)
	mustCommit(t, h.store, exe, execstore.Commit{})
	_, restore := fired.Finish(bg)
	require.NotNil(t, restore)
	ok, err := restore(bg)
	require.NoError(t, err)
	assert.False(t, ok)
	assert.NotContains(t, timersOf(t, h, "x"), "a")
}

// A fired timer of another execution, and a commit after the handler returned, carry
// nothing.
func TestFiredTimerOnlyItsExecutionsCommitsWhileItsHandlerRuns(t *testing.T) {
	h, exe, fired := firedHarness(t, false)
	other := newExe("y")
	mustCommit(t, h.store, other, execstore.Commit{})
	ctx := wake.WithFiredTimer(bg, fired)
	_, err := h.store.Commit(ctx, other, execstore.Commit{})
	require.NoError(t, err)
	removed, restore := fired.Finish(bg)
	assert.False(t, removed)
	assert.Nil(t, restore)
	_, err = h.store.Commit(ctx, exe, execstore.Commit{})
	require.NoError(t, err)
	assert.Contains(t, timersOf(t, h, "x"), "a", "the handler had returned")
	assert.Zero(t, h.store.Stats().TimersCarried)
}

// The exact command: the commit's filter guards the timer's fire time (and its arming
// version, when known), its update unsets both; the restore is guarded by the version and
// token of that commit and the path being empty, and puts the arming version back.
func TestFiredTimerCommands(t *testing.T) {
	exe := &execstore.Execution{ID: "x", DefinitionID: "d", Status: execstore.Running, Version: 4}
	at := time.Unix(1_700_000_000, 500_000_000).UTC()
	p, err := ops.BuildCommit(ops.Layout{Profile: server.MongoDB, TraceMax: 200}, exe, &execstore.Commit{}, ops.Seqs{Fired: []ops.FiredRef{{Path: "a", FireAt: at}}})
	require.NoError(t, err)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: int64(4)}, {Key: "timers.a", Value: 1_700_000_000.5}}, p.Filter)
	unset, ok := lookupOp(p.Update, "$unset")
	require.True(t, ok)
	assert.Equal(t, bson.D{{Key: "timers.a", Value: ""}, {Key: "timer_v.a", Value: ""}}, unset)
	p, err = ops.BuildCommit(ops.Layout{Profile: server.MongoDB, TraceMax: 200}, exe, &execstore.Commit{},
		ops.Seqs{Fired: []ops.FiredRef{{Path: "a", FireAt: at, Version: 3}}})
	require.NoError(t, err)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: int64(4)}, {Key: "timers.a", Value: 1_700_000_000.5},
		{Key: "timer_v.a", Value: int64(3)}}, p.Filter)

	filter, update := ops.RestoreTimerCommand("x", "a", at, 3, 5, 77)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: int64(5)}, {Key: "commit_token", Value: int64(77)},
		{Key: "timers.a", Value: bson.D{{Key: "$exists", Value: false}}}}, filter)
	assert.Equal(t, bson.D{{Key: "$set", Value: bson.D{{Key: "timers.a", Value: 1_700_000_000.5}, {Key: "timer_v.a", Value: int64(3)}}},
		{Key: "$min", Value: bson.D{{Key: "timer_min", Value: 1_700_000_000.5}}},
		{Key: "$inc", Value: bson.D{{Key: "version", Value: int64(1)}}}, {Key: "$unset", Value: bson.D{{Key: "commit_token", Value: ""}}}}, update)
	_, update = ops.RestoreTimerCommand("x", "a", at, 0, 5, 77)
	assert.Equal(t, bson.E{Key: "$set", Value: bson.D{{Key: "timers.a", Value: 1_700_000_000.5}}}, update[0], "no arming version known: none written")
}

func lookupOp(update bson.D, op string) (bson.D, bool) {
	for _, e := range update {
		if e.Key == op {
			d, ok := e.Value.(bson.D)
			return d, ok
		}
	}
	return nil, false
}

// A sweep reads the document after the handler's commit removed its only timer, the handler
// fails and the timer is restored, and then the sweep's repair of the timer hint, computed
// without the timer, lands: the restore moved the version on, so the repair matches nothing
// and the restored timer is due.
func TestFiredTimerRestoreIsNotUndoneByAStaleHintRepair(t *testing.T) {
	h, exe, fired := firedHarness(t, false)
	_, err := h.store.Commit(wake.WithFiredTimer(bg, fired), exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("b")}})
	require.NoError(t, err)
	assert.Empty(t, timersOf(t, h, "x"))
	doc := h.rawDoc(t, "x") // the sweep's read
	version, hint := rawInt(t, doc, ops.FieldVersion), doc.Lookup(ops.FieldTimerMin).Double()

	_, restore := fired.Finish(bg)
	ok, err := restore(bg)
	require.NoError(t, err)
	require.True(t, ok)
	filter, update := opsrun.RepairHintCommand("x", version, hint, map[string]float64{})
	res, err := h.db.Collection(ops.ExecutionsCollection).UpdateOne(bg, filter, update)
	require.NoError(t, err)
	assert.Zero(t, res.MatchedCount, "the stale repair is refused")
	due, err := h.store.DueTimers(bg, time.Now(), 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Equal(t, "a", due[0].Path)

	// The handler's execution, as the caller holds it, is behind the restore: its next commit
	// is refused by the version guard, and a reload goes on.
	_, err = h.store.Commit(bg, exe, execstore.Commit{})
	var conflict *execstore.ConflictError
	require.ErrorAs(t, err, &conflict)
	again, err := h.store.Load(bg, "x")
	require.NoError(t, err)
	_, err = h.store.Commit(bg, again, execstore.Commit{})
	require.NoError(t, err)
}

// A commit that re-arms the fired timer's path to the same fire time supersedes it: a later
// commit of the handler does not remove the re-armed timer.
func TestFiredTimerSupersededByAReArmToTheSameTime(t *testing.T) {
	h, exe, fired := firedHarness(t, false)
	ctx := wake.WithFiredTimer(bg, fired)
	mustCommit(t, h.store, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", fired.Timer.FireAt)}})
	_, err := h.store.Commit(ctx, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", fired.Timer.FireAt)}})
	require.NoError(t, err)
	_, err = h.store.Commit(ctx, exe, execstore.Commit{})
	require.NoError(t, err)
	assert.Contains(t, timersOf(t, h, "x"), "a")
	removed, restore := fired.Finish(bg)
	assert.False(t, removed)
	assert.Nil(t, restore)
}
