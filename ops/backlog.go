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

// BacklogDoc is one partition's row of BacklogPipeline, or one document's of the find that
// stands in for it (BacklogProjection) once folded.
type BacklogDoc struct {
	Partition     *int32    `bson:"_id"` // nil: the documents written without a partition
	PendingOutbox int64     `bson:"outbox"`
	PendingSpawns int64     `bson:"spawns"`
	Dead          int64     `bson:"dead"`
	OldestPending time.Time `bson:"oldest,omitempty"`
	DueTimers     int64     `bson:"due"`
	OldestDue     *float64  `bson:"oldest_due"` // stored seconds; nil when none is due
}

// BacklogPipeline is the aggregation of ExecutionsCollection that sums up, per partition, the
// work waiting at now, one BacklogDoc per partition with any, in partition order: the
// documents BacklogFilter selects; their entries' and intents' counts and the oldest commit
// time among them (each entry's and intent's at); their timers due at now, counted, and the
// earliest fire time among them; their dead items' counts. It needs $objectToArray, $map,
// $filter, $concatArrays and $min over an array in $project: a server without them (FerretDB
// 1.x) refuses it, and BacklogProjection's find stands in.
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

// BacklogProjection is the projection of the find of BacklogFilter that stands in for
// BacklogPipeline where a server lacks its operators: each document's partition, counts,
// entries, intents and timers, folded by the caller (FoldBacklog). It reads the entries whole,
// events and contexts included.
func BacklogProjection() bson.D {
	p := bson.D{}
	for _, f := range []string{FieldPartition, fOutboxN, fSpawnsN, fDeadN, FieldOutbox, FieldSpawns, FieldTimers} {
		p = append(p, bson.E{Key: f, Value: 1})
	}
	return p
}

// FoldBacklog adds doc, one document of BacklogProjection's find, to rows, the rows of
// BacklogPipeline by partition, as the pipeline would count it at now.
func FoldBacklog(rows map[int32]*BacklogDoc, doc bson.Raw, now time.Time) error {
	var d struct {
		Partition *int32               `bson:"partition"`
		OutboxN   int64                `bson:"outbox_n"`
		SpawnsN   int64                `bson:"spawns_n"`
		DeadN     int64                `bson:"dead_n"`
		Outbox    map[string]OutboxDoc `bson:"outbox"`
		Spawns    map[string]SpawnDoc  `bson:"spawns"`
		Timers    map[string]float64   `bson:"timers"`
	}
	if err := bson.Unmarshal(doc, &d); err != nil {
		return err
	}
	var p int32 // a document without a partition is in partition 0
	if d.Partition != nil {
		p = *d.Partition
	}
	row := rows[p]
	if row == nil {
		row = &BacklogDoc{Partition: &p}
		rows[p] = row
	}
	row.PendingOutbox += d.OutboxN
	row.PendingSpawns += d.SpawnsN
	row.Dead += d.DeadN
	older := func(at time.Time) {
		if !at.IsZero() && (row.OldestPending.IsZero() || at.Before(row.OldestPending)) {
			row.OldestPending = at
		}
	}
	for _, e := range d.Outbox {
		older(e.At)
	}
	for _, s := range d.Spawns {
		older(s.At)
	}
	limit := contract.StoredTime(now)
	for _, at := range d.Timers {
		if at > limit {
			continue
		}
		row.DueTimers++
		if row.OldestDue == nil || at < *row.OldestDue {
			row.OldestDue = &at
		}
	}
	return nil
}
