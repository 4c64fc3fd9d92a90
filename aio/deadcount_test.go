package aio_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/ops"
)

// CountDeadIn counts, in one aggregate, the dead items of every kind in the partitions asked
// for, as the dead letters listed one by one give them; an execution written before
// partitions counts in partition 0; partitions with none are absent. An empty list sends
// nothing, and a partition out of range is refused before any I/O.
func TestCountDeadInAgreesWithTheDeadListed(t *testing.T) {
	h := newHarness(t, aio.Options{Partitions: 4})
	s := h.store
	now := time.Now()
	overdue := now.Add(-time.Minute).Truncate(time.Microsecond)
	kill := func(ref execstore.ItemRef) {
		t.Helper()
		_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "no", At: now, Dead: true})
		require.NoError(t, err)
		require.True(t, ok, "%+v", ref)
	}
	for i := range 9 {
		id := fmt.Sprintf("dead-count-%d", i)
		exe := newExe(id)
		seqs, err := s.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}, {Event: []byte("b")}},
			Spawns: []execstore.Spawn{{ChildID: id + "-child"}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("t", overdue)}})
		require.NoError(t, err)
		for j := range i % 3 { // 0, 1 or 2 dead entries
			kill(execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: id, Seq: seqs[j]})
		}
		if i%2 == 1 {
			kill(execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: id, Path: "t", FireAt: overdue})
		}
	}
	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	for _, sp := range spawns[:3] {
		kill(execstore.ItemRef{Kind: execstore.SpawnItem, ExecutionID: sp.ParentID, Seq: sp.Seq})
	}
	// One execution with dead items loses its partition, as one written before partitions.
	old := "dead-count-5"
	require.NotZero(t, execstore.PartitionOf(old, s.Partitions()), "pick an id outside partition 0")
	res, err := h.db.Collection(ops.ExecutionsCollection).UpdateOne(bg, bson.D{{Key: "_id", Value: old}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: ops.FieldPartition, Value: ""}}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.ModifiedCount)

	want := map[int]int64{}
	var listed int64
	for cursor := ""; ; {
		page, err := s.ListDead(bg, execstore.DeadQuery{Cursor: cursor})
		require.NoError(t, err)
		for _, d := range page.Items {
			p := execstore.PartitionOf(d.ExecutionID, s.Partitions())
			if d.ExecutionID == old {
				p = 0
			}
			want[p]++
			listed++
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.EqualValues(t, 9+4+3, listed, "the items killed")
	require.Greater(t, len(want), 1, "dead items in several partitions")

	h.cmds.reset()
	got, err := s.CountDeadIn(bg, []int{3, 2, 1, 0})
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Equal(t, []string{"aggregate"}, h.cmds.snapshot())

	some, err := s.CountDeadIn(bg, []int{0})
	require.NoError(t, err)
	assert.Equal(t, map[int]int64{0: want[0]}, some, "only the partition asked for, the unpartitioned execution in it")

	h.cmds.reset()
	none, err := s.CountDeadIn(bg, nil)
	require.NoError(t, err)
	assert.Empty(t, none)
	_, err = s.CountDeadIn(bg, []int{4})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	assert.Empty(t, h.cmds.snapshot(), "nothing sent")
}
