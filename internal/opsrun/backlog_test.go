package opsrun

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/ops"
)

// The find that stands in for the aggregation folds documents to the rows the aggregation
// gives: counts summed, the oldest commit time and the earliest due fire time kept, timers to
// come and entries without a commit time left out, no partition counted as partition 0.
func TestFoldBacklog(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	t1, t2 := time.UnixMilli(1_799_999_000_000).UTC(), time.UnixMilli(1_799_999_500_000).UTC()
	docs := []bson.D{
		{{Key: "partition", Value: int32(3)}, {Key: "outbox_n", Value: int64(2)},
			{Key: "outbox", Value: bson.D{{Key: "1", Value: ops.OutboxDoc{Seq: 1, At: t2}}, {Key: "2", Value: ops.OutboxDoc{Seq: 2}}}},
			{Key: "timers", Value: bson.D{{Key: "a", Value: 1.7e9}, {Key: "b", Value: 1.9e9}}}},
		{{Key: "partition", Value: int32(3)}, {Key: "spawns_n", Value: int32(1)}, {Key: "dead_n", Value: int32(4)},
			{Key: "spawns", Value: bson.D{{Key: "7", Value: ops.SpawnDoc{Seq: 7, At: t1}}}},
			{Key: "timers", Value: bson.D{{Key: "c", Value: 1.6e9}}}},
		{{Key: "dead_n", Value: int64(1)}},
	}
	rows := map[int32]*backlogRow{}
	for _, d := range docs {
		raw, err := bson.Marshal(d)
		require.NoError(t, err)
		require.NoError(t, foldBacklog(rows, raw, now))
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
