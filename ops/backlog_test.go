package ops

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The backlog's aggregation as MongoDB receives it, stage by stage.
func TestBacklogPipeline(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	e := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	gt0 := func(f string) bson.D { return e(f, e("$gt", 0)) }
	pairs := func(f string) bson.D { return e("$objectToArray", e("$ifNull", bson.A{"$" + f, bson.D{}})) }
	due := e("$filter", bson.D{
		{Key: "input", Value: e("$map", bson.D{{Key: "input", Value: pairs("timers")}, {Key: "in", Value: "$$this.v"}})},
		{Key: "cond", Value: e("$lte", bson.A{"$$this", 1.8e9})},
	})
	want := []bson.D{
		e("$match", e("$or", bson.A{gt0("outbox_n"), gt0("spawns_n"),
			e("timer_min", bson.D{{Key: "$exists", Value: true}, {Key: "$lte", Value: 1.8e9}}), gt0("dead_n")})),
		e("$project", bson.D{
			{Key: "partition", Value: 1}, {Key: "outbox_n", Value: 1}, {Key: "spawns_n", Value: 1}, {Key: "dead_n", Value: 1},
			{Key: "oldest", Value: e("$min", e("$concatArrays", bson.A{
				e("$map", bson.D{{Key: "input", Value: pairs("outbox")}, {Key: "in", Value: "$$this.v.at"}}),
				e("$map", bson.D{{Key: "input", Value: pairs("spawns")}, {Key: "in", Value: "$$this.v.at"}}),
			}))},
			{Key: "due", Value: e("$size", due)},
			{Key: "oldest_due", Value: e("$min", due)},
		}),
		e("$group", bson.D{
			{Key: "_id", Value: "$partition"},
			{Key: "outbox", Value: e("$sum", "$outbox_n")},
			{Key: "spawns", Value: e("$sum", "$spawns_n")},
			{Key: "dead", Value: e("$sum", "$dead_n")},
			{Key: "oldest", Value: e("$min", "$oldest")},
			{Key: "due", Value: e("$sum", "$due")},
			{Key: "oldest_due", Value: e("$min", "$oldest_due")},
		}),
		e("$sort", e("_id", 1)),
	}
	assert.Equal(t, want, BacklogPipeline(now))
}

// The find that stands in for the aggregation folds documents to the rows the aggregation
// gives: counts summed, the oldest commit time and the earliest due fire time kept, timers to
// come and entries without a commit time left out, no partition counted as partition 0.
func TestFoldBacklog(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	t1, t2 := time.UnixMilli(1_799_999_000_000).UTC(), time.UnixMilli(1_799_999_500_000).UTC()
	docs := []bson.D{
		{{Key: "partition", Value: int32(3)}, {Key: "outbox_n", Value: int64(2)},
			{Key: "outbox", Value: bson.D{{Key: "1", Value: OutboxDoc{Seq: 1, At: t2}}, {Key: "2", Value: OutboxDoc{Seq: 2}}}},
			{Key: "timers", Value: bson.D{{Key: "a", Value: 1.7e9}, {Key: "b", Value: 1.9e9}}}},
		{{Key: "partition", Value: int32(3)}, {Key: "spawns_n", Value: int32(1)}, {Key: "dead_n", Value: int32(4)},
			{Key: "spawns", Value: bson.D{{Key: "7", Value: SpawnDoc{Seq: 7, At: t1}}}},
			{Key: "timers", Value: bson.D{{Key: "c", Value: 1.6e9}}}},
		{{Key: "dead_n", Value: int64(1)}},
	}
	rows := map[int32]*BacklogDoc{}
	for _, d := range docs {
		raw, err := bson.Marshal(d)
		require.NoError(t, err)
		require.NoError(t, FoldBacklog(rows, raw, now))
	}
	require.Len(t, rows, 2)
	r := rows[3]
	assert.Equal(t, int64(2), r.PendingOutbox)
	assert.Equal(t, int64(1), r.PendingSpawns)
	assert.Equal(t, int64(4), r.Dead)
	assert.True(t, r.OldestPending.Equal(t1), "oldest %s", r.OldestPending)
	assert.Equal(t, int64(2), r.DueTimers)
	require.NotNil(t, r.OldestDue)
	assert.Equal(t, 1.6e9, *r.OldestDue)
	assert.Equal(t, int64(1), rows[0].Dead)
	assert.Nil(t, rows[0].OldestDue)
}
