package ops

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Indexes returns the indexes of ExecutionsCollection, so that every scan costs in proportion
// to what it returns. The relays read only the documents of their partitions with pending
// entries (PendingOutboxScan, PendingSpawnsScan). The sweep reads only the documents of its
// partitions whose timer hint is due (DueScan). Each of these indexes has the partition
// first. A listing page walks an index in _id order. Creating an index that exists is a
// no-op. Create them with one createIndexes each: FerretDB 1.24.2 drops the connection on a
// createIndexes that names several indexes some of which exist.
func Indexes() []mongo.IndexModel {
	return []mongo.IndexModel{
		{Keys: bson.D{{Key: FieldPartition, Value: 1}, {Key: fOutboxN, Value: 1}}, Options: options.Index().SetName(IndexOutboxByPartition)},
		{Keys: bson.D{{Key: FieldPartition, Value: 1}, {Key: fSpawnsN, Value: 1}}, Options: options.Index().SetName(IndexSpawnsByPartition)},
		{Keys: bson.D{{Key: FieldPartition, Value: 1}, {Key: FieldTimerMin, Value: 1}}, Options: options.Index().SetName(IndexTimersByPartition)},
		{Keys: bson.D{{Key: FieldDefinitionID, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_definition")},
		{Keys: bson.D{{Key: FieldStatus, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_status")},
		{Keys: bson.D{{Key: FieldParentID, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_parent")},
	}
}

// ObsoleteIndexes returns the names of the indexes an earlier version of the module created
// on ExecutionsCollection and no scan uses any more: the scans without partitions. Drop them
// where present. Every secondary index costs every update, on some servers an entry per
// update whatever changed.
func ObsoleteIndexes() []string {
	return []string{"outbox_pending", "spawns_pending", "timers_due"}
}
