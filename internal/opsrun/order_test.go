package opsrun

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/ops"
)

// filtersOf returns the filters of update models, in the order the bulk write sends them.
func filtersOf(t *testing.T, models []mongo.WriteModel) []bson.D {
	t.Helper()
	out := make([]bson.D, len(models))
	for i, m := range models {
		u, ok := m.(*mongo.UpdateOneModel)
		require.True(t, ok)
		out[i] = u.Filter.(bson.D)
	}
	return out
}

// A group commit's statements go out by execution id, whatever order the callers came in:
// two batches over the same executions take their row locks in one order.
func TestCommitBatchStatementsInIDOrder(t *testing.T) {
	var plans []*ops.CommitPlan
	for i, id := range []string{"c", "a", "d", "b"} {
		plans = append(plans, &ops.CommitPlan{ID: id, Token: int64(10 - i),
			Filter: bson.D{{Key: fID, Value: id}, {Key: ops.FieldVersion, Value: int64(1)}},
			Update: bson.D{{Key: "$set", Value: bson.D{{Key: ops.FieldVersion, Value: int64(2)}}}}})
	}
	var ids []string
	for _, f := range filtersOf(t, commitModels(plans)) {
		ids = append(ids, f[0].Value.(string))
	}
	assert.Equal(t, []string{"a", "b", "c", "d"}, ids)
	assert.Equal(t, "c", plans[0].ID, "the plans keep their own order: outcomes are reported by index")
}

// Acks, spawn acks and timer deletes in one coalesced bulk go out by _id, then by operation and
// filter, so the order is total: the same writes in any arrival order give the same bulk. A
// timer delete's two statements (TestTimerDeleteStatements) stay together.
func TestIdempotentWritesInIDOrder(t *testing.T) {
	writes := []IdempotentWrite{
		OutboxAckWrite("b", 7),
		DeleteTimerWrite("a", "T", time.Unix(3, 0), 0),
		OutboxAckWrite("b", 2),
		SpawnAckWrite("a", 1),
		OutboxAckWrite("a", 9),
	}
	want := []bson.D{
		OutboxAckWrite("a", 9).Filter,
		SpawnAckWrite("a", 1).Filter,
		lastTimerFilter("a", "T", time.Unix(3, 0)),
		besidesTimerFilter("a", "T", time.Unix(3, 0)),
		OutboxAckWrite("b", 2).Filter,
		OutboxAckWrite("b", 7).Filter,
	}
	assert.Equal(t, want, filtersOf(t, idempotentModels(Env{}, writes)))
	reversed := make([]IdempotentWrite, len(writes))
	for i, w := range writes {
		reversed[len(writes)-1-i] = w
	}
	assert.Equal(t, want, filtersOf(t, idempotentModels(Env{}, reversed)))
}

func lastTimerFilter(id, path string, at time.Time) bson.D {
	f, _ := ops.DeleteLastTimerCommand(id, path, at, 0)
	return f
}

func besidesTimerFilter(id, path string, at time.Time) bson.D {
	f, _ := ops.DeleteTimerBesidesCommand(id, path, at, 0)
	return f
}
