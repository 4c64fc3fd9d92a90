package opsrun

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

func TestIdempotentWrites(t *testing.T) {
	w := OutboxAckWrite("x", 5)
	filter, update := ops.AckOutboxCommand("x", 5)
	assert.Equal(t, filter, w.Filter)
	assert.Equal(t, update, w.Update)
	w = SpawnAckWrite("y", 6)
	assert.Equal(t, bson.D{{Key: "_id", Value: "y"}, {Key: "spawns.6", Value: bson.D{{Key: "$exists", Value: true}}}}, w.Filter)
}

// On the MongoDB profile a bulk sends a timer delete as the last-timer statement, then the
// one beside other timers, in the global order with the others; the FerretDB profile sends
// the delete as it is.
func TestTimerDeleteStatements(t *testing.T) {
	at := time.Unix(10, 0)
	writes := []IdempotentWrite{DeleteTimerWrite("b", "p", at, 0), OutboxAckWrite("a", 5)}
	models := idempotentModels(Env{Layout: ops.Layout{Profile: server.MongoDB}}, writes)
	require.Len(t, models, 3)
	ackFilter, _ := ops.AckOutboxCommand("a", 5)
	lastFilter, lastUpdate := ops.DeleteLastTimerCommand("b", "p", at, 0)
	besidesFilter, besidesUpdate := ops.DeleteTimerBesidesCommand("b", "p", at, 0)
	assert.Equal(t, ackFilter, models[0].(*mongo.UpdateOneModel).Filter)
	assert.Equal(t, lastFilter, models[1].(*mongo.UpdateOneModel).Filter)
	assert.Equal(t, lastUpdate, models[1].(*mongo.UpdateOneModel).Update)
	assert.Equal(t, besidesFilter, models[2].(*mongo.UpdateOneModel).Filter)
	assert.Equal(t, besidesUpdate, models[2].(*mongo.UpdateOneModel).Update)

	models = idempotentModels(Env{Layout: ops.Layout{Profile: server.FerretDB}}, writes[:1])
	require.Len(t, models, 1)
	filter, update := ops.DeleteTimerCommand("b", "p", at, 0)
	assert.Equal(t, filter, models[0].(*mongo.UpdateOneModel).Filter)
	assert.Equal(t, update, models[0].(*mongo.UpdateOneModel).Update)
}

// A timer delete merged with other writes of its document has the last-timer form (the
// timer's guard replaced by the timer alone in FieldTimers, the hint unset too) and the
// besides form (the guards as they were, and another timer required), as command documents.
func TestTimerDeleteMergedForms(t *testing.T) {
	at := time.Unix(10, 0)
	writes := []IdempotentWrite{OutboxAckWrite("x", 5), DeleteTimerWrite("x", "p", at, 6)}
	filter, update := documentStatement(writes)
	last, besides, lastUpdate := writes[1].lastTimer.merged(filter, update)
	exists := bson.D{{Key: "$exists", Value: true}}
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "outbox.5", Value: exists},
		{Key: "timers", Value: bson.D{{Key: "p", Value: 10.0}}}, {Key: "timer_v.p", Value: int64(6)}}, last)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "outbox.5", Value: exists}, {Key: "timers.p", Value: 10.0},
		{Key: "timer_v.p", Value: int64(6)}, {Key: "timers", Value: bson.D{{Key: "$ne", Value: bson.D{{Key: "p", Value: 10.0}}}}}}, besides)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "outbox.5", Value: ""}, {Key: "timers.p", Value: ""}, {Key: "timer_v.p", Value: ""}, {Key: "timer_min", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(-1)}}},
	}, lastUpdate)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "outbox.5", Value: ""}, {Key: "timers.p", Value: ""}, {Key: "timer_v.p", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(-1)}}},
	}, update, "the statement itself is left as it was")
}
