package opsrun

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Two acks and a fired timer's delete of one document: one updateOne, guarded by all three
// (the timer by its arming version too), that unsets the three paths (and the timer's version) and takes the two acks off the count.
func TestDocumentStatement(t *testing.T) {
	at := time.Unix(10, 0)
	filter, update := documentStatement([]IdempotentWrite{OutboxAckWrite("a", 5), OutboxAckWrite("a", 7), DeleteTimerWrite("a", "T", at, 3), SpawnAckWrite("a", 2)})
	exists := bson.D{{Key: "$exists", Value: true}}
	assert.Equal(t, bson.D{
		{Key: "_id", Value: "a"},
		{Key: "outbox.5", Value: exists},
		{Key: "outbox.7", Value: exists},
		{Key: "timers.T", Value: float64(10)},
		{Key: "timer_v.T", Value: int64(3)},
		{Key: "spawns.2", Value: exists},
	}, filter)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "outbox.5", Value: ""}, {Key: "outbox.7", Value: ""}, {Key: "timers.T", Value: ""}, {Key: "timer_v.T", Value: ""},
			{Key: "spawns.2", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(-2)}, {Key: "spawns_n", Value: int64(-1)}}},
	}, update)
}

// Writes share a statement only when they are several, of one document, each with a path of
// its own.
func TestOneStatement(t *testing.T) {
	at := time.Unix(10, 0)
	assert.True(t, oneStatement([]IdempotentWrite{OutboxAckWrite("a", 1), OutboxAckWrite("a", 2), DeleteTimerWrite("a", "T", at, 0)}))
	assert.False(t, oneStatement([]IdempotentWrite{OutboxAckWrite("a", 1)}), "one write")
	assert.False(t, oneStatement([]IdempotentWrite{OutboxAckWrite("a", 1), OutboxAckWrite("b", 2)}), "two documents")
	assert.False(t, oneStatement([]IdempotentWrite{OutboxAckWrite("a", 1), OutboxAckWrite("a", 1)}), "one entry acked twice")
	assert.False(t, oneStatement([]IdempotentWrite{DeleteTimerWrite("a", "T", at, 0), DeleteTimerWrite("a", "T", at.Add(time.Second), 0)}), "one path twice")
}
