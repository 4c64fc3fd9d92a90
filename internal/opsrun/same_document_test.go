package opsrun

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/server"
)

// Two acks and a fired timer's delete of one document: one updateOne, guarded by all three,
// that unsets the three paths and takes the two acks off the count.
func TestDocumentStatement(t *testing.T) {
	at := time.Unix(10, 0)
	filter, update := documentStatement([]IdempotentWrite{OutboxAckWrite("a", 5), OutboxAckWrite("a", 7), DeleteTimerWrite("a", "T", at), SpawnAckWrite("a", 2)})
	exists := bson.D{{Key: "$exists", Value: true}}
	assert.Equal(t, bson.D{
		{Key: "_id", Value: "a"},
		{Key: "outbox.5", Value: exists},
		{Key: "outbox.7", Value: exists},
		{Key: "timers.T", Value: float64(10)},
		{Key: "spawns.2", Value: exists},
	}, filter)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "outbox.5", Value: ""}, {Key: "outbox.7", Value: ""}, {Key: "timers.T", Value: ""}, {Key: "spawns.2", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(-2)}, {Key: "spawns_n", Value: int64(-1)}}},
	}, update)
}

// The statements of a bulk on the MongoDB profile: a document's writes share one, but a write
// that removes a path its document's statement removes already (the same entry acked twice)
// starts the next; the statements keep the global order.
func TestSameDocumentGroups(t *testing.T) {
	env := Env{}
	env.Profile = server.MongoDB
	writes := []IdempotentWrite{
		OutboxAckWrite("b", 1),
		OutboxAckWrite("a", 1),
		OutboxAckWrite("a", 2),
		OutboxAckWrite("a", 1), // twice
		OutboxAckWrite("c", 4),
	}
	models, shared := idempotentModels(env, writes)
	var ids []string
	var guards []int
	for _, m := range models {
		u, ok := m.(*mongo.UpdateOneModel)
		require.True(t, ok)
		f := u.Filter.(bson.D)
		ids = append(ids, f[0].Value.(string))
		guards = append(guards, len(f)-1)
	}
	assert.Equal(t, []string{"a", "a", "b", "c"}, ids)
	// In the global order a's writes are ack 1, ack 1 again, ack 2: the second ack 1 starts
	// a's second statement, which ack 2 joins.
	assert.Equal(t, []int{1, 2, 1, 1}, guards)
	assert.ElementsMatch(t, []int{3, 2}, shared, "the writes that share a statement")

	env.Profile = server.FerretDB
	_, shared = idempotentModels(env, writes)
	assert.Empty(t, shared, "the FerretDB formulation merges by kind instead")
}
