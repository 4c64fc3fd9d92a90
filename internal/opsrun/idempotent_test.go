package opsrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/ops"
)

func TestIdempotentWrites(t *testing.T) {
	w := OutboxAckWrite("x", 5)
	filter, update := ops.AckOutboxCommand("x", 5)
	assert.Equal(t, filter, w.Filter)
	assert.Equal(t, update, w.Update)
	w = SpawnAckWrite("y", 6)
	assert.Equal(t, bson.D{{Key: "_id", Value: "y"}, {Key: "spawns.6", Value: bson.D{{Key: "$exists", Value: true}}}}, w.Filter)
}
