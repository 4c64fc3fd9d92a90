package opsrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

func TestDedupeFilters(t *testing.T) {
	env := Env{Layout: ops.Layout{DedupeWindow: 5}}
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "$or", Value: bson.A{
		bson.D{{Key: "processed_0", Value: "e"}}, bson.D{{Key: "processed_1", Value: "e"}}}}}, processedFilter(env, "x", "e"))
	assert.Equal(t, bson.D{{Key: "$concatArrays", Value: bson.A{
		bson.D{{Key: "$ifNull", Value: bson.A{"$processed_0", bson.A{}}}},
		bson.D{{Key: "$ifNull", Value: bson.A{"$processed_1", bson.A{}}}},
	}}}, dedupeSetExpr(env))
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "processed", Value: "e"}}, processedFilter(Env{}, "x", "e"))
}

// The read that tells why a commit's guard missed asks the server, on MongoDB, whether the
// event is in the set; without an event it reads the version and trace index alone.
func TestStateProjection(t *testing.T) {
	base := bson.D{{Key: "version", Value: 1}, {Key: "trace_next", Value: 1}}
	assert.Equal(t, base, stateProjection(Env{}, ""))
	assert.Equal(t, append(base, bson.E{Key: "hit", Value: bson.D{{Key: "$in", Value: bson.A{
		bson.D{{Key: "$literal", Value: "$e"}},
		bson.D{{Key: "$concatArrays", Value: bson.A{
			bson.D{{Key: "$ifNull", Value: bson.A{"$processed_0", bson.A{}}}},
			bson.D{{Key: "$ifNull", Value: bson.A{"$processed_1", bson.A{}}}},
		}}},
	}}}}), stateProjection(Env{Layout: ops.Layout{Profile: server.MongoDB, DedupeWindow: 4}}, "$e"))
}
