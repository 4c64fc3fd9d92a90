package aio_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/ops"
)

// Each commit that arms a timer records its version beside it (ops.FieldTimerVersions), in
// its one write; a cancel removes it, a delete too. A timer of a document written before
// (no version stored) comes back with Version 0 and is deleted by path and fire time alone,
// in bulk and as the last timer of its document; a later re-arm records its version.
func TestTimerVersionsAndOldDocuments(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("a.b", unixAt(10)), execstore.ScheduleTimer("c", unixAt(20))}})
	require.NoError(t, err)
	assert.EqualValues(t, 1, h.rawDoc(t, "e").Lookup(ops.FieldTimerVersions, ops.EncodeKey("a.b")).Int64())
	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("a.b", unixAt(10)), execstore.CancelTimer("c")}})
	require.NoError(t, err)
	doc := h.rawDoc(t, "e")
	assert.EqualValues(t, 2, doc.Lookup(ops.FieldTimerVersions, ops.EncodeKey("a.b")).Int64(), "re-armed to the same time: another arming")
	_, err = doc.LookupErr(ops.FieldTimerVersions, "c")
	assert.Error(t, err, "a cancel removes the version")

	// As a document written before versions were kept.
	_, err = h.db.Collection(ops.ExecutionsCollection).UpdateOne(bg, bson.D{{Key: "_id", Value: "e"}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: ops.FieldTimerVersions, Value: ""}}}})
	require.NoError(t, err)
	due, err := h.store.DueTimers(bg, unixAt(50), 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "a.b", FireAt: unixAt(10)}}, due, "no version stored: 0")
	require.NoError(t, h.store.DeleteTimers(bg, due))
	due, err = h.store.DueTimers(bg, unixAt(50), 0)
	require.NoError(t, err)
	assert.Empty(t, due, "matched by path and fire time alone")

	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", unixAt(10))}})
	require.NoError(t, err)
	due, err = h.store.DueTimers(bg, unixAt(50), 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "a.b", FireAt: unixAt(10), Version: 3}}, due)
	stale := due[0]
	stale.Version = 2
	require.NoError(t, h.store.DeleteTimers(bg, []execstore.DueTimer{stale}))
	left, err := h.store.DueTimers(bg, unixAt(50), 0)
	require.NoError(t, err)
	assert.Equal(t, due, left, "another arming's delete leaves it")
	require.NoError(t, h.store.DeleteTimers(bg, due))
	left, err = h.store.DueTimers(bg, unixAt(50), 0)
	require.NoError(t, err)
	assert.Empty(t, left)
	_, err = h.rawDoc(t, "e").LookupErr(ops.FieldTimerVersions, ops.EncodeKey("a.b"))
	assert.Error(t, err, "the delete removes the version with the timer")
}
