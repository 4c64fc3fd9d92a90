package ops

import (
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

// BacklogFilter selects the documents with work waiting at now: a pending outbox entry or
// spawn intent, a timer hint due (see DueFilter), or a dead item. Each branch is a pending-work
// index's partial filter as written, so a server with those indexes can answer each branch
// from its index.
func BacklogFilter(now time.Time) bson.D {
	return bson.D{{Key: "$or", Value: bson.A{PendingOutboxFilter(), PendingSpawnsFilter(), DueFilter(now), DeadItemsFilter()}}}
}

// DeadItemsFilter selects the documents that hold at least one dead item.
func DeadItemsFilter() bson.D {
	return bson.D{{Key: fDeadN, Value: bson.D{{Key: "$gt", Value: 0}}}}
}

// BacklogPipeline is the aggregation of ExecutionsCollection that sums up, per partition, the
// work waiting at now, one row per partition with any, in partition order: the
// documents BacklogFilter selects; their entries' and intents' counts and the oldest commit
// time among them (each entry's and intent's at); their timers due at now, counted, and the
// earliest fire time among them; their dead items' counts. It needs $objectToArray, $map,
// $filter, $concatArrays and $min over an array in $project: a server without them (FerretDB
// 1.x) refuses it, and a find of BacklogFilter stands in.
func BacklogPipeline(now time.Time) []bson.D {
	e := func(k string, v any) bson.D { return bson.D{{Key: k, Value: v}} }
	pairs := func(field string) bson.D {
		return e("$objectToArray", e("$ifNull", bson.A{"$" + field, bson.D{}}))
	}
	commitTimes := func(field string) bson.D {
		return e("$map", bson.D{{Key: "input", Value: pairs(field)}, {Key: "in", Value: "$$this.v.at"}})
	}
	due := e("$filter", bson.D{
		{Key: "input", Value: e("$map", bson.D{{Key: "input", Value: pairs(FieldTimers)}, {Key: "in", Value: "$$this.v"}})},
		{Key: "cond", Value: e("$lte", bson.A{"$$this", contract.StoredTime(now)})},
	})
	return []bson.D{
		e("$match", BacklogFilter(now)),
		e("$project", bson.D{
			{Key: FieldPartition, Value: 1}, {Key: fOutboxN, Value: 1}, {Key: fSpawnsN, Value: 1}, {Key: fDeadN, Value: 1},
			{Key: "oldest", Value: e("$min", e("$concatArrays", bson.A{commitTimes(FieldOutbox), commitTimes(FieldSpawns)}))},
			{Key: "due", Value: e("$size", due)},
			{Key: "oldest_due", Value: e("$min", due)},
		}),
		e("$group", bson.D{
			{Key: "_id", Value: "$" + FieldPartition},
			{Key: "outbox", Value: e("$sum", "$"+fOutboxN)},
			{Key: "spawns", Value: e("$sum", "$"+fSpawnsN)},
			{Key: "dead", Value: e("$sum", "$"+fDeadN)},
			{Key: "oldest", Value: e("$min", "$oldest")},
			{Key: "due", Value: e("$sum", "$due")},
			{Key: "oldest_due", Value: e("$min", "$oldest_due")},
		}),
		e("$sort", e("_id", 1)),
	}
}
