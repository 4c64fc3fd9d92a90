package ops

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// The backlog's aggregation as MongoDB receives it, stage by stage.
func TestBacklogPipeline(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	e := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	gt0 := func(f string) bson.D { return e(f, e("$gt", 0)) }
	due := func(f string) bson.D { return e(f, bson.D{{Key: "$exists", Value: true}, {Key: "$lte", Value: 1.8e9}}) }
	inPartition := func(d bson.D) bson.D { return append(bson.D{{Key: "partition", Value: e("$gte", 0)}}, d...) }
	noPartition := func(d bson.D) bson.D { return append(bson.D{{Key: "partition", Value: nil}}, d...) }
	pairs := func(f string) bson.D { return e("$objectToArray", e("$ifNull", bson.A{"$" + f, bson.D{}})) }
	dueTimers := e("$filter", bson.D{
		{Key: "input", Value: e("$map", bson.D{{Key: "input", Value: pairs("timers")}, {Key: "in", Value: "$$this.v"}})},
		{Key: "cond", Value: e("$lte", bson.A{"$$this", 1.8e9})},
	})
	want := []bson.D{
		e("$match", e("$or", bson.A{
			inPartition(gt0("outbox_n")), noPartition(gt0("outbox_n")),
			inPartition(gt0("spawns_n")), noPartition(gt0("spawns_n")),
			inPartition(due("timer_min")), noPartition(due("timer_min")),
			inPartition(gt0("dead_n")), noPartition(gt0("dead_n")),
		})),
		e("$group", bson.D{
			{Key: "_id", Value: "$partition"},
			{Key: "outbox", Value: e("$sum", "$outbox_n")},
			{Key: "spawns", Value: e("$sum", "$spawns_n")},
			{Key: "dead", Value: e("$sum", "$dead_n")},
			{Key: "oldest", Value: e("$min", e("$min", e("$concatArrays", bson.A{
				e("$map", bson.D{{Key: "input", Value: pairs("outbox")}, {Key: "in", Value: "$$this.v.at"}}),
				e("$map", bson.D{{Key: "input", Value: pairs("spawns")}, {Key: "in", Value: "$$this.v.at"}}),
			})))},
			{Key: "due", Value: e("$sum", e("$size", dueTimers))},
			{Key: "oldest_due", Value: e("$min", e("$min", dueTimers))},
		}),
		e("$sort", e("_id", 1)),
	}
	assert.Equal(t, want, BacklogPipeline(now))
}
