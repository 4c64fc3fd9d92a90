package aio_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/ops"
)

// Backlog agrees with what the store's own reads return, partition by partition: pending
// entries and intents and the oldest one's commit time, due timers (not the ones to come) and
// the earliest fire time among them, and dead items; an execution with nothing waiting counts
// nowhere. On a server with the aggregation's operators it is one aggregate, and its figures
// are those of the find that stands in for it elsewhere.
func TestBacklogAgreesWithTheStoresReads(t *testing.T) {
	h := newHarness(t, aio.Options{})
	s := h.store
	now := time.Now()
	a := newExe("backlog-a")
	_, err := s.Commit(bg, a, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("1")}, {Event: []byte("2")}}})
	require.NoError(t, err)
	time.Sleep(5 * time.Millisecond)
	_, err = s.Commit(bg, a, execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "backlog-a-child"}}})
	require.NoError(t, err)
	b := newExe("backlog-b")
	overdue := now.Add(-time.Hour).Truncate(time.Microsecond)
	seqs, err := s.Commit(bg, b, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("dies")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("late", overdue), execstore.ScheduleTimer("later", now.Add(time.Hour))}})
	require.NoError(t, err)
	_, ok, err := s.Fail(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: b.ID, Seq: seqs[0]},
		execstore.Failure{Error: "no", At: now, Dead: true})
	require.NoError(t, err)
	require.True(t, ok)
	c := newExe("backlog-c")
	seqs, err = s.Commit(bg, c, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("acked")}}})
	require.NoError(t, err)
	require.NoError(t, s.AckOutbox(bg, c.ID, seqs[0]))

	want := expectedBacklog(t, s)
	require.Len(t, want, 2, "a's and b's partitions: pick ids in two")

	h.cmds.reset()
	got, err := s.Backlog(bg)
	require.NoError(t, err)
	names := h.cmds.snapshot()
	assertBacklog(t, want, got)
	byFind, err := s.BacklogByFind(bg)
	require.NoError(t, err)
	assertBacklog(t, want, byFind)
	switch {
	case slices.Equal(names, []string{"aggregate"}):
		t.Logf("the server answered the aggregation")
	case slices.Equal(names, []string{"aggregate", "find"}):
		t.Logf("the server refused the aggregation's operators: the find stood in")
	default:
		t.Errorf("Backlog sent %v: want one aggregate, or an aggregate refused and one find", names)
	}
}

// An execution written before partitions, with no partition, counts in partition 0, each kind
// of work waiting: the backlog's filter names the partition to reach the indexes, and must
// still match a document without one.
func TestBacklogCountsAnExecutionWithoutAPartitionInPartitionZero(t *testing.T) {
	h := newHarness(t, aio.Options{Partitions: 4})
	s := h.store
	id := "backlog-old"
	for i := 0; execstore.PartitionOf(id, s.Partitions()) == 0; i++ {
		id = fmt.Sprintf("backlog-old-%d", i)
	}
	now := time.Now()
	overdue := now.Add(-time.Minute).Truncate(time.Microsecond)
	exe := newExe(id)
	seqs, err := s.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("dies")}, {Event: []byte("waits")}},
		Spawns: []execstore.Spawn{{ChildID: id + "-child"}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("late", overdue)}})
	require.NoError(t, err)
	_, ok, err := s.Fail(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: id, Seq: seqs[0]},
		execstore.Failure{Error: "no", At: now, Dead: true})
	require.NoError(t, err)
	require.True(t, ok)
	res, err := h.db.Collection(ops.ExecutionsCollection).UpdateOne(bg, bson.D{{Key: "_id", Value: id}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: ops.FieldPartition, Value: ""}}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.ModifiedCount)

	for name, read := range map[string]func(context.Context) ([]execstore.PartitionBacklog, error){
		"aggregation": s.Backlog, "find": s.BacklogByFind,
	} {
		got, err := read(bg)
		require.NoError(t, err, name)
		require.Len(t, got, 1, "%s: %+v", name, got)
		g := got[0]
		assert.Equal(t, 0, g.Partition, name)
		assert.EqualValues(t, 1, g.PendingOutbox, name)
		assert.EqualValues(t, 1, g.PendingSpawns, name)
		assert.EqualValues(t, 1, g.DueTimers, name)
		assert.EqualValues(t, 1, g.Dead, name)
		assert.True(t, overdue.Equal(g.OldestDue), "%s: oldest due %s", name, g.OldestDue)
		assert.False(t, g.OldestPending.IsZero(), name)
	}
}

// expectedBacklog is the backlog as the store's reads of the whole collection give it.
func expectedBacklog(t *testing.T, s *aio.Store) map[int]execstore.PartitionBacklog {
	t.Helper()
	rows := map[int]execstore.PartitionBacklog{}
	at := func(id string) *execstore.PartitionBacklog {
		p := execstore.PartitionOf(id, s.Partitions())
		r := rows[p]
		r.Partition = p
		rows[p] = r
		return &r
	}
	update := func(id string, f func(r *execstore.PartitionBacklog)) {
		r := at(id)
		f(r)
		rows[r.Partition] = *r
	}
	older := func(r *execstore.PartitionBacklog, t time.Time) {
		if r.OldestPending.IsZero() || t.Before(r.OldestPending) {
			r.OldestPending = t
		}
	}
	out, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	for _, e := range out {
		update(e.SourceID, func(r *execstore.PartitionBacklog) { r.PendingOutbox++; older(r, e.CommittedAt) })
	}
	sp, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	for _, e := range sp {
		update(e.ParentID, func(r *execstore.PartitionBacklog) { r.PendingSpawns++; older(r, e.CommittedAt) })
	}
	due, err := s.DueTimers(bg, time.Now(), 0)
	require.NoError(t, err)
	for _, d := range due {
		update(d.ExecutionID, func(r *execstore.PartitionBacklog) {
			r.DueTimers++
			if r.OldestDue.IsZero() || d.FireAt.Before(r.OldestDue) {
				r.OldestDue = d.FireAt
			}
		})
	}
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	for _, d := range page.Items {
		update(d.ExecutionID, func(r *execstore.PartitionBacklog) { r.Dead++ })
	}
	return rows
}

func assertBacklog(t *testing.T, want map[int]execstore.PartitionBacklog, got []execstore.PartitionBacklog) {
	t.Helper()
	require.Len(t, got, len(want), "%+v", got)
	for i, g := range got {
		if i > 0 {
			assert.Less(t, got[i-1].Partition, g.Partition, "partition order")
		}
		w, ok := want[g.Partition]
		require.True(t, ok, "partition %d has nothing waiting: %+v", g.Partition, g)
		assert.False(t, g.Now.IsZero())
		assert.Equal(t, w.PendingOutbox, g.PendingOutbox, "partition %d outbox", g.Partition)
		assert.Equal(t, w.PendingSpawns, g.PendingSpawns, "partition %d spawns", g.Partition)
		assert.Equal(t, w.DueTimers, g.DueTimers, "partition %d due timers", g.Partition)
		assert.Equal(t, w.Dead, g.Dead, "partition %d dead", g.Partition)
		assert.True(t, w.OldestPending.Equal(g.OldestPending), "partition %d oldest pending: want %s, got %s",
			g.Partition, w.OldestPending, g.OldestPending)
		assert.True(t, w.OldestDue.Equal(g.OldestDue), "partition %d oldest due: want %s, got %s", g.Partition, w.OldestDue, g.OldestDue)
		if !g.OldestDue.IsZero() {
			assert.Greater(t, g.TimerLag(), 59*time.Minute, "partition %d lag", g.Partition)
		}
		if !g.OldestPending.IsZero() {
			assert.Less(t, g.PendingAge(), time.Minute, "partition %d age", g.Partition)
		}
	}
}

// A stale timer hint (the FerretDB profile never repairs one; here it is written directly)
// with no timer due behind it is no backlog: its partition gets no row of zeros, by either
// formulation, while a partition with work waiting keeps its row.
func TestBacklogLeavesOutAStaleHint(t *testing.T) {
	h := newHarness(t, aio.Options{Partitions: 4})
	s := h.store
	stale, busy := "backlog-stale", "backlog-busy"
	for i := 0; execstore.PartitionOf(stale, 4) == execstore.PartitionOf(busy, 4); i++ {
		busy = fmt.Sprintf("backlog-busy-%d", i)
	}
	require.NoError(t, s.Save(bg, newExe(stale)))
	exe := newExe(busy)
	_, err := s.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("waits")}}})
	require.NoError(t, err)
	res, err := h.db.Collection(ops.ExecutionsCollection).UpdateOne(bg, bson.D{{Key: "_id", Value: stale}},
		bson.D{{Key: "$set", Value: bson.D{{Key: ops.FieldTimerMin, Value: float64(time.Now().Add(-time.Hour).Unix())}}}})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.ModifiedCount)

	for name, read := range map[string]func(context.Context) ([]execstore.PartitionBacklog, error){
		"aggregation": s.Backlog, "find": s.BacklogByFind,
	} {
		got, err := read(bg)
		require.NoError(t, err, name)
		require.Len(t, got, 1, "%s: only the partition with an entry waiting: %+v", name, got)
		assert.Equal(t, execstore.PartitionOf(busy, 4), got[0].Partition, name)
		assert.EqualValues(t, 1, got[0].PendingOutbox, name)
		assert.Zero(t, got[0].DueTimers, name)
	}
}
