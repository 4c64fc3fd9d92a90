package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The createIndexes index documents, exactly, in the order they are tried: DocumentDB builds
// the first, MongoDB refuses enableCompositeTerm and builds the second (a partial index), and
// FerretDB 1.24 refuses partialFilterExpression too and builds the last.
func TestIndexForms(t *testing.T) {
	byName := map[string]IndexSpec{}
	for _, spec := range Indexes() {
		byName[spec.Name] = spec
	}
	key := bson.D{{Key: "partition", Value: 1}, {Key: "outbox_n", Value: 1}}
	partial := bson.E{Key: "partialFilterExpression", Value: bson.D{{Key: "outbox_n", Value: bson.D{{Key: "$gt", Value: 0}}}}}
	assert.Equal(t, []bson.D{
		{{Key: "key", Value: key}, {Key: "name", Value: "pending_outbox_by_partition"}, partial, {Key: "enableCompositeTerm", Value: true}},
		{{Key: "key", Value: key}, {Key: "name", Value: "pending_outbox_by_partition"}, partial},
		{{Key: "key", Value: key}, {Key: "name", Value: "pending_outbox_by_partition"}},
	}, byName[IndexPendingOutbox].Forms())

	key = bson.D{{Key: "partition", Value: 1}, {Key: "timer_min", Value: 1}}
	partial = bson.E{Key: "partialFilterExpression", Value: bson.D{{Key: "timer_min", Value: bson.D{{Key: "$exists", Value: true}}}}}
	assert.Equal(t, []bson.D{
		{{Key: "key", Value: key}, {Key: "name", Value: "pending_timers_by_partition"}, partial, {Key: "enableCompositeTerm", Value: true}},
		{{Key: "key", Value: key}, {Key: "name", Value: "pending_timers_by_partition"}, partial},
		{{Key: "key", Value: key}, {Key: "name", Value: "pending_timers_by_partition"}},
	}, byName[IndexPendingTimers].Forms())

	key = bson.D{{Key: "status", Value: 1}, {Key: "_id", Value: 1}}
	assert.Equal(t, []bson.D{
		{{Key: "key", Value: key}, {Key: "name", Value: "by_status"}, {Key: "enableCompositeTerm", Value: true}},
		{{Key: "key", Value: key}, {Key: "name", Value: "by_status"}},
	}, byName[IndexByStatus].Forms())

	key = bson.D{{Key: "partition", Value: 1}, {Key: "finished_at", Value: 1}}
	partial = bson.E{Key: "partialFilterExpression", Value: bson.D{{Key: "finished_at", Value: bson.D{{Key: "$exists", Value: true}}}}}
	assert.Equal(t, []bson.D{
		{{Key: "key", Value: key}, {Key: "name", Value: "finished_by_partition"}, partial, {Key: "enableCompositeTerm", Value: true}},
		{{Key: "key", Value: key}, {Key: "name", Value: "finished_by_partition"}, partial},
		{{Key: "key", Value: key}, {Key: "name", Value: "finished_by_partition"}},
	}, byName[IndexFinished].Forms())

	assert.Equal(t, gt0Forms("dead_by_partition", "dead_n"), byName[IndexDead].Forms())

	assert.Len(t, Indexes(), 7, "two pending-work indexes, one of timers, one of dead items, one of finished executions, two of listings")
	assert.Equal(t, []bson.D{{{Key: "key", Value: bson.D{{Key: "a", Value: 1}}}, {Key: "name", Value: "a"}}},
		IndexSpec{Name: "a", Key: bson.D{{Key: "a", Value: 1}}}.Forms())
}

// gt0Forms are the forms of an index {partition, field} partial on field above 0.
func gt0Forms(name, field string) []bson.D {
	key := bson.D{{Key: "partition", Value: 1}, {Key: field, Value: 1}}
	partial := bson.E{Key: "partialFilterExpression", Value: bson.D{{Key: field, Value: bson.D{{Key: "$gt", Value: 0}}}}}
	return []bson.D{
		{{Key: "key", Value: key}, {Key: "name", Value: name}, partial, {Key: "enableCompositeTerm", Value: true}},
		{{Key: "key", Value: key}, {Key: "name", Value: name}, partial},
		{{Key: "key", Value: key}, {Key: "name", Value: name}},
	}
}
