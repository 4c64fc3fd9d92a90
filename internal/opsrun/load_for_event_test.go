package opsrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The MongoDB formulation of LoadForEvent: $match by _id, then $project of the snapshot with a
// server-side $in over $ifNull of the dedupe set.
func TestLoadForEventPipeline(t *testing.T) {
	p := loadForEventPipeline(Env{}, "x", "ev")
	require.Len(t, p, 2)
	assert.Equal(t, bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: "x"}}}}, p[0])
	project := p[1][0].Value.(bson.D)
	assert.Equal(t, "$project", p[1][0].Key)
	assert.Equal(t, bson.E{Key: "hit", Value: bson.D{{Key: "$in", Value: bson.A{
		bson.D{{Key: "$literal", Value: "ev"}}, bson.D{{Key: "$ifNull", Value: bson.A{"$processed", bson.A{}}}},
	}}}}, project[len(project)-1])
	for _, e := range project {
		assert.NotEqual(t, "processed", e.Key, "the dedupe set must never be projected")
		assert.NotEqual(t, "outbox", e.Key)
	}
}
