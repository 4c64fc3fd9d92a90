package ops_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/ops"
)

// The dead letters' commands, as documents: each a single-document update guarded by the
// item as it was read.
func TestDeadLetterCommands(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	entry := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: "x", Seq: 7}
	filter, update := ops.FailCommand(entry, 0, ops.TimerFailDoc{Failures: ops.Failures{Attempts: 2}},
		ops.Failures{Attempts: 3, LastError: "e", LastAt: at})
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "outbox.7.seq", Value: int64(7)}, {Key: "outbox.7.attempts", Value: int64(2)}}, filter)
	assert.Equal(t, bson.D{{Key: "$set", Value: bson.D{{Key: "outbox.7.attempts", Value: int64(3)},
		{Key: "outbox.7.last_error", Value: "e"}, {Key: "outbox.7.last_at", Value: at}}}}, update)

	dead := ops.DeadDoc{Kind: "outbox", Seq: 7, Failures: ops.Failures{Attempts: 1}, DeadAt: at}
	filter, update = ops.DeadCommand(entry, 0, ops.TimerFailDoc{}, dead)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "outbox.7.seq", Value: int64(7)},
		{Key: "outbox.7.attempts", Value: bson.D{{Key: "$exists", Value: false}}}}, filter)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "outbox.7", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(-1)}, {Key: "dead_n", Value: int64(1)}}},
		{Key: "$set", Value: bson.D{{Key: "dead.o7", Value: dead}}},
	}, update)

	timer := execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: "x", Path: "a.b", FireAt: at}
	filter, update = ops.DeadCommand(timer, 1.5e9, ops.TimerFailDoc{At: 1.5e9, Failures: ops.Failures{Attempts: 1}},
		ops.DeadDoc{Kind: "timer", Path: "a.b", FireAt: 1.5e9, Version: 3, DeadAt: at})
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "timers.a%2Eb", Value: 1.5e9},
		{Key: "timer_fails.a%2Eb.at", Value: 1.5e9}, {Key: "timer_fails.a%2Eb.attempts", Value: int64(1)}}, filter)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "timers.a%2Eb", Value: ""}, {Key: "timer_v.a%2Eb", Value: ""}, {Key: "timer_fails.a%2Eb", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "dead_n", Value: int64(1)}}},
		{Key: "$set", Value: bson.D{{Key: "dead.ta%2Eb", Value: ops.DeadDoc{Kind: "timer", Path: "a.b", FireAt: 1.5e9, Version: 3, DeadAt: at}}}},
	}, update)

	// A revival makes the item pending again: it moves the version on and drops the commit
	// token, in the same write; a timer gets its arming version back.
	hint := 1.6e9
	filter, update = ops.ReviveCommand(timer, ops.DeadDoc{Kind: "timer", Path: "a.b", FireAt: 1.5e9, Version: 3}, nil, &hint)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "dead.ta%2Eb.kind", Value: "timer"},
		{Key: "dead.ta%2Eb.fire_at", Value: 1.5e9}, {Key: "timers.a%2Eb", Value: bson.D{{Key: "$exists", Value: false}}},
		{Key: "timer_min", Value: 1.6e9}}, filter)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "dead.ta%2Eb", Value: ""}, {Key: "commit_token", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "dead_n", Value: int64(-1)}, {Key: "version", Value: int64(1)}}},
		{Key: "$set", Value: bson.D{{Key: "timers.a%2Eb", Value: 1.5e9}, {Key: "timer_min", Value: math.Nextafter(1.5e9, math.Inf(-1))},
			{Key: "timer_v.a%2Eb", Value: int64(3)}}},
	}, update)
	pending := ops.OutboxDoc{Seq: 7, Version: 2, Event: []byte("e"), At: at}
	filter, update = ops.ReviveCommand(entry, ops.DeadDoc{Kind: "outbox", Seq: 7, Version: 2}, pending, nil)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "dead.o7.kind", Value: "outbox"}, {Key: "dead.o7.seq", Value: int64(7)}}, filter)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "dead.o7", Value: ""}, {Key: "commit_token", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(1)}, {Key: "dead_n", Value: int64(-1)}, {Key: "version", Value: int64(1)}}},
		{Key: "$set", Value: bson.D{{Key: "outbox.7", Value: pending}}},
	}, update)
	// Revived later than the hint: the hint still moves (below itself), so a repair that read
	// it before misses its guard.
	hint = 1.4e9
	_, update = ops.ReviveCommand(timer, ops.DeadDoc{Kind: "timer", Path: "a.b", FireAt: 1.5e9}, nil, &hint)
	assert.Equal(t, bson.E{Key: "timer_min", Value: math.Nextafter(1.4e9, math.Inf(-1))}, update[2].Value.(bson.D)[1])
}

// The dead count's aggregation as MongoDB receives it: the dead index's partial filter with
// the partitions named (null with 0), then a sum of the counts per partition.
func TestDeadCountPipeline(t *testing.T) {
	e := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	want := []bson.D{
		e("$match", bson.D{
			{Key: "partition", Value: e("$in", bson.A{int32(0), int32(3), nil})},
			{Key: "dead_n", Value: e("$gt", 0)},
		}),
		e("$group", bson.D{{Key: "_id", Value: "$partition"}, {Key: "dead", Value: e("$sum", "$dead_n")}}),
	}
	assert.Equal(t, want, ops.DeadCountPipeline([]int{3, 0}))
	want[0] = e("$match", bson.D{
		{Key: "partition", Value: e("$in", bson.A{int32(2)})},
		{Key: "dead_n", Value: e("$gt", 0)},
	})
	assert.Equal(t, want, ops.DeadCountPipeline([]int{2}))
}
