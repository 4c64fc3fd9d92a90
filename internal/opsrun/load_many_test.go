package opsrun

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// Many LoadForEvent calls in one aggregation (MongoDB): match by _id $in, and pick each
// document's own event id by its position in ids before the server-side $in.
func TestLoadForEventsPipeline(t *testing.T) {
	p := loadForEventsPipeline(Env{}, []string{"a", "b"}, []string{"ea", "eb"})
	require.Len(t, p, 2)
	assert.Equal(t, bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}}}}}, p[0])
	project := p[1][0].Value.(bson.D)
	assert.Equal(t, bson.E{Key: "hit", Value: bson.D{{Key: "$in", Value: bson.A{
		bson.D{{Key: "$arrayElemAt", Value: bson.A{
			bson.D{{Key: "$literal", Value: bson.A{"ea", "eb"}}},
			bson.D{{Key: "$indexOfArray", Value: bson.A{bson.D{{Key: "$literal", Value: bson.A{"a", "b"}}}, "$_id"}}},
		}}},
		bson.D{{Key: "$ifNull", Value: bson.A{"$processed", bson.A{}}}},
	}}}}, project[len(project)-1])
}
