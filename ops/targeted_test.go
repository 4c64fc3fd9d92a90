package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The targeted reads' finds, exactly: the ids in increasing order, then the read's own
// condition, its sort, and the _id index it is hinted to; one id alone by equality.
func TestTargetedReadCommands(t *testing.T) {
	in := func(v ...any) bson.E { return bson.E{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A(v)}}} }
	assert.Equal(t, Scan{
		Filter: bson.D{in("a", "b", "c"), {Key: "outbox_n", Value: bson.D{{Key: "$gt", Value: 0}}}},
		Hint:   "_id_",
	}, PendingOutboxScanOf([]string{"c", "a", "b"}))
	assert.Equal(t, Scan{
		Filter: bson.D{{Key: "_id", Value: "x"}},
		Hint:   "_id_",
	}, DueScanOf([]string{"x"}, unixAt(100)))
	assert.Equal(t, Scan{
		Filter: bson.D{in("x", "y"), {Key: "timer_min", Value: bson.D{{Key: "$exists", Value: true}, {Key: "$lte", Value: 100.0}}}},
		Hint:   "_id_",
	}, DueScanOf([]string{"y", "x"}, unixAt(100)))
	assert.Equal(t, Scan{
		Filter: bson.D{{Key: "_id", Value: "a"}},
		Hint:   "_id_",
	}, PendingOutboxScanOf([]string{"a"}))
	// Leaving out one id is a $nin all the same.
	assert.Equal(t, bson.E{Key: "_id", Value: bson.D{{Key: "$nin", Value: bson.A{"a"}}}},
		Except(Scan{Filter: bson.D{}}, []string{"a"}).Filter[0])
}
