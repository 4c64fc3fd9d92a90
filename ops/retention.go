package ops

import (
	"maps"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
)

// IndexFinished is the index of the finished executions by partition and finish time
// (FieldFinishedAt), partial on the field being present: the retention's scan (ExpiredScan).
const IndexFinished = "finished_by_partition"

// heldNothing are the conditions of a document that holds no pending entry or intent, no
// timer and no dead item: each count absent or not above 0, and FieldTimers empty or absent.
// A timer hint left behind by the last timer's removal does not hold it: the hint is no
// timer, and on the FerretDB formulation nothing removes it before the sweep repairs it.
func heldNothing() bson.D {
	not0 := func(f string) bson.E {
		return bson.E{Key: f, Value: bson.D{{Key: "$not", Value: bson.D{{Key: "$gt", Value: 0}}}}}
	}
	return bson.D{not0(fOutboxN), not0(fSpawnsN), not0(fDeadN),
		{Key: FieldTimers, Value: bson.D{{Key: "$in", Value: bson.A{bson.D{}, nil}}}}}
}

// pastCutoffs is the condition of a document finished past its status's cutoff: one branch
// per status of cutoffs, in status order.
func pastCutoffs(cutoffs map[execstore.Status]time.Time) bson.E {
	branches := bson.A{}
	for _, s := range slices.Sorted(maps.Keys(cutoffs)) {
		branches = append(branches, bson.D{{Key: FieldStatus, Value: string(s)},
			{Key: FieldFinishedAt, Value: bson.D{{Key: "$lte", Value: cutoffs[s].UTC().Truncate(time.Millisecond)}}}})
	}
	return bson.E{Key: "$or", Value: branches}
}

// latest is the latest of cutoffs.
func latest(cutoffs map[execstore.Status]time.Time) time.Time {
	var t time.Time
	for _, c := range cutoffs {
		if c.After(t) {
			t = c
		}
	}
	return t.UTC().Truncate(time.Millisecond)
}

// ExpiredScan selects the documents of partitions finished past their status's cutoff
// (cutoffs must not be empty) that hold nothing, on IndexFinished, in no order: a sort by
// finish time across partitions would read every finished document of them before the first
// answer. Its range on FieldFinishedAt (present, at or before the latest cutoff) is what the
// index narrows; the rest is checked on the documents it yields.
func ExpiredScan(partitions []int, cutoffs map[execstore.Status]time.Time) Scan {
	filter := bson.D{InPartitions(partitions),
		{Key: FieldFinishedAt, Value: bson.D{{Key: "$exists", Value: true}, {Key: "$lte", Value: latest(cutoffs)}}},
		pastCutoffs(cutoffs)}
	return Scan{Filter: append(filter, heldNothing()...), Hint: IndexFinished}
}

// ExpiredProjection is what ExpiredScan reads of a document: ExpiredDoc's fields.
func ExpiredProjection() bson.D {
	return bson.D{{Key: FieldStatus, Value: 1}, {Key: FieldFinishedAt, Value: 1}, {Key: FieldVersion, Value: 1},
		{Key: FieldParentID, Value: 1}}
}

// ExpiredDoc is a document as ExpiredScan reads it.
type ExpiredDoc struct {
	ID         string    `bson:"_id"`
	Status     string    `bson:"status"`
	FinishedAt time.Time `bson:"finished_at"`
	Version    int64     `bson:"version"`
	ParentID   *string   `bson:"parent_id"`
}

// DeleteExpiredCommand is the deleteMany of the executions of expired, all of one status,
// each only at the version read and while still finished past its cutoff and holding
// nothing: a commit, an ack or a failure since the read leaves the execution alone. expired
// is sent in _id order.
func DeleteExpiredCommand(expired []execstore.FinishedExecution, cutoffs map[execstore.Status]time.Time) bson.D {
	sorted := slices.SortedFunc(slices.Values(expired), func(a, b execstore.FinishedExecution) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	each := make(bson.A, len(sorted))
	for i, e := range sorted {
		each[i] = bson.D{{Key: fID, Value: e.ID}, {Key: FieldVersion, Value: e.Version}}
	}
	filter := bson.D{{Key: "$or", Value: each}, pastCutoffs(cutoffs)}
	return append(filter, heldNothing()...)
}

// RetentionID is the _id, in CountersCollection, of the document that counts the executions
// of collection deleted for their retention.
func RetentionID(collection string) string { return "retention/" + collection }

// RetentionDocument is the counting document of collection before any delete. It is created
// by an insert: a duplicate-key refusal means it exists.
func RetentionDocument(collection string) bson.D {
	return bson.D{{Key: fID, Value: RetentionID(collection)}, {Key: FieldRetentionDeleted, Value: bson.D{}}}
}

// Fields of RetentionDocument: the counts by status, and when the last were added.
const (
	FieldRetentionDeleted = "deleted"
	FieldRetentionLastAt  = "last_at"
)

// CountDeletedCommand is the updateOne that adds deleted, counts by status, to the counting
// document of collection, at at.
func CountDeletedCommand(collection string, deleted map[execstore.Status]int64, at time.Time) (filter, update bson.D) {
	inc := bson.D{}
	for _, s := range slices.Sorted(maps.Keys(deleted)) {
		if deleted[s] > 0 {
			inc = append(inc, bson.E{Key: FieldRetentionDeleted + "." + string(s), Value: deleted[s]})
		}
	}
	return bson.D{{Key: fID, Value: RetentionID(collection)}},
		bson.D{{Key: "$inc", Value: inc}, {Key: "$max", Value: bson.D{{Key: FieldRetentionLastAt, Value: at.UTC().Truncate(time.Millisecond)}}}}
}
