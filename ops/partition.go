package ops

import (
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
)

// Every execution document a commit creates stores its partition, FieldPartition:
// execstore.PartitionOf(_id, Layout.Partitions). No update changes it, so a document keeps its
// partition for life. The number of partitions of a database is recorded once, in
// CountersCollection (PartitionsDocument), and every store of the database uses it.
//
// A document written without a partition (by an earlier version of the module) is in
// partition 0's scans until it is given its own (AssignPartitionCommand).

// Scan is the find of a partitioned scan: its filter, its sort (nil for none) and the name of
// the index it is hinted to.
type Scan struct {
	Filter bson.D
	Sort   bson.D
	Hint   string
}

// PendingOutboxScan selects the documents of partitions that hold at least one outbox entry,
// on IndexPendingOutbox. partitions must be distinct and in [0, n) for the
// database's n.
func PendingOutboxScan(partitions []int) Scan {
	return Scan{Filter: append(bson.D{InPartitions(partitions)}, PendingOutboxFilter()...), Hint: IndexPendingOutbox}
}

// PendingSpawnsScan is PendingOutboxScan for the spawn intents, on IndexPendingSpawns.
func PendingSpawnsScan(partitions []int) Scan {
	return Scan{Filter: append(bson.D{InPartitions(partitions)}, PendingSpawnsFilter()...), Hint: IndexPendingSpawns}
}

// DueScan selects the documents of partitions whose timer hint is due at now (see DueFilter),
// in hint order, on IndexPendingTimers.
func DueScan(partitions []int, now time.Time) Scan {
	return Scan{Filter: append(bson.D{InPartitions(partitions)}, DueFilter(now)...),
		Sort: bson.D{{Key: FieldTimerMin, Value: 1}}, Hint: IndexPendingTimers}
}

// InPartitions is the condition {partition: {$in: partitions}}, the partitions in increasing
// order. When partitions holds 0 the list also holds null, which matches a document with no
// partition field.
func InPartitions(partitions []int) bson.E {
	sorted := slices.Sorted(slices.Values(partitions))
	in := make(bson.A, 0, len(sorted)+1)
	for _, p := range sorted {
		in = append(in, int32(p))
	}
	if len(sorted) > 0 && sorted[0] == 0 {
		in = append(in, nil)
	}
	return bson.E{Key: FieldPartition, Value: bson.D{{Key: "$in", Value: in}}}
}

// AllPartitions returns the partitions 0 to n-1.
func AllPartitions(n int) []int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}

// MissingPartitionFilter selects the documents with no partition field.
func MissingPartitionFilter() bson.D {
	return bson.D{{Key: FieldPartition, Value: bson.D{{Key: "$exists", Value: false}}}}
}

// AssignPartitionCommand is the updateOne that gives execution id, written without a
// partition, its partition among n. It matches nothing once the document has one, so it may
// be repeated and never changes a partition.
func AssignPartitionCommand(id string, n int) (filter, update bson.D) {
	filter = append(bson.D{{Key: fID, Value: id}}, MissingPartitionFilter()...)
	update = bson.D{{Key: "$set", Value: bson.D{{Key: FieldPartition, Value: int32(execstore.PartitionOf(id, n))}}}}
	return filter, update
}

// PartitionsID is the _id, in CountersCollection, of the document that records the number of
// partitions of the executions collection named collection.
func PartitionsID(collection string) string { return "partitions/" + collection }

// PartitionsDocument is the document that records n partitions for collection. It is created
// by an insert: a duplicate-key refusal means it is recorded already, and the recorded number
// is the one to use. Its field FieldPartitions holds n.
func PartitionsDocument(collection string, n int) bson.D {
	return bson.D{{Key: fID, Value: PartitionsID(collection)}, {Key: FieldPartitions, Value: int32(n)}}
}

// FieldPartitions is the field of PartitionsDocument that holds the number of partitions.
const FieldPartitions = "partitions"
