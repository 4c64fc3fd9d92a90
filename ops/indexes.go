package ops

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Indexes returns the indexes of ExecutionsCollection, so that every scan costs in proportion
// to what it returns. The relays read only documents with pending entries
// (PendingOutboxFilter, PendingSpawnsFilter). The sweep reads only documents whose timer hint
// is due (DueFilter). A listing page walks an index in _id order. Creating an index that
// exists is a no-op. Create them with one createIndexes each: FerretDB 1.24.2 drops the
// connection on a createIndexes that names several indexes some of which exist.
func Indexes() []mongo.IndexModel {
	return []mongo.IndexModel{
		{Keys: bson.D{{Key: fOutboxN, Value: 1}}, Options: options.Index().SetName("outbox_pending")},
		{Keys: bson.D{{Key: fSpawnsN, Value: 1}}, Options: options.Index().SetName("spawns_pending")},
		{Keys: bson.D{{Key: FieldTimerMin, Value: 1}}, Options: options.Index().SetName("timers_due").SetSparse(true)},
		{Keys: bson.D{{Key: FieldDefinitionID, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_definition")},
		{Keys: bson.D{{Key: FieldStatus, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_status")},
		{Keys: bson.D{{Key: FieldParentID, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_parent")},
	}
}
