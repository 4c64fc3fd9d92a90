package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// A reservation is an $inc of the counter document found by _id, never an upsert, and the
// counter is created by inserting it at zero.
func TestCounterCommands(t *testing.T) {
	filter, update := ReserveCommand(OutboxCounter, 256)
	assert.Equal(t, bson.D{{Key: "_id", Value: "outbox"}}, filter)
	assert.Equal(t, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: int64(256)}}}}, update)
	assert.Equal(t, bson.D{{Key: "_id", Value: "spawn"}, {Key: "n", Value: int64(0)}}, CounterDocument(SpawnCounter))
}
