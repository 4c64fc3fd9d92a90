package opsrun

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/server"
)

func TestMergedAckStatement(t *testing.T) {
	filter, update := mergedStatement([]IdempotentWrite{OutboxAckWrite("a", 5), OutboxAckWrite("b", 7)})
	exists := bson.D{{Key: "$exists", Value: true}}
	assert.Equal(t, bson.D{
		{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "_id", Value: "a"}, {Key: "outbox.5", Value: exists}},
			bson.D{{Key: "_id", Value: "b"}, {Key: "outbox.7", Value: exists}},
		}},
	}, filter)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "outbox.5", Value: ""}, {Key: "outbox.7", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(-1)}}},
	}, update)
}

func TestMergedTimerStatement(t *testing.T) {
	at := time.Unix(10, 0)
	filter, update := mergedStatement([]IdempotentWrite{DeleteTimerWrite("a", "T", at, 0), DeleteTimerWrite("b", "T", at, 4)})
	assert.Equal(t, bson.D{{Key: "$unset", Value: bson.D{{Key: "timers.T", Value: ""}, {Key: "timer_v.T", Value: ""}}}}, update,
		"one path with its arming version, no count")
	assert.Equal(t, bson.D{
		{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}},
		{Key: "$or", Value: bson.A{
			bson.D{{Key: "_id", Value: "a"}, {Key: "timers.T", Value: float64(10)}},
			bson.D{{Key: "_id", Value: "b"}, {Key: "timers.T", Value: float64(10)}, {Key: "timer_v.T", Value: int64(4)}},
		}},
	}, filter, "each document by its own guard, its arming version when known")
}

func TestMergedModels(t *testing.T) {
	env := Env{}
	env.Profile = server.FerretDB
	many := func(ws []IdempotentWrite) []int {
		var sizes []int
		for _, m := range idempotentModels(env, ws) {
			u, ok := m.(*mongo.UpdateManyModel)
			if !ok {
				return nil
			}
			sizes = append(sizes, len(u.Filter.(bson.D)[1].Value.(bson.A)))
		}
		return sizes
	}
	var acks []IdempotentWrite
	for i := range 200 {
		acks = append(acks, OutboxAckWrite(fmt.Sprintf("x%03d", i), int64(i)))
	}
	assert.Equal(t, []int{96, 96, 8}, many(acks), "at most mergedLimit writes a statement")
	assert.Nil(t, many([]IdempotentWrite{OutboxAckWrite("a", 1)}), "one write: an updateOne")
	assert.Nil(t, many([]IdempotentWrite{OutboxAckWrite("a", 1), SpawnAckWrite("b", 2)}), "kinds differ")
	at := time.Unix(10, 0)
	assert.Nil(t, many([]IdempotentWrite{DeleteTimerWrite("a", "T", at, 0), DeleteTimerWrite("b", "U", at, 0)}), "paths differ")
	assert.Equal(t, []int{1, 2}, many([]IdempotentWrite{OutboxAckWrite("b", 3), OutboxAckWrite("a", 1), OutboxAckWrite("a", 2)}),
		"a document once a statement")

	env.Profile = server.MongoDB
	for _, m := range idempotentModels(env, acks[:3]) {
		_, ok := m.(*mongo.UpdateOneModel)
		require.True(t, ok, "the MongoDB profile sends one updateOne a write")
	}
}
