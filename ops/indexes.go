package ops

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// indexes are the indexes of the executions collection, so that every scan costs in
// proportion to what it returns: the relays read only documents with pending entries, the
// sweep only documents whose timer hint is due, and a listing page walks an index in _id
// order.
func indexes() []mongo.IndexModel {
	return []mongo.IndexModel{
		{Keys: bson.D{{Key: fOutboxN, Value: 1}}, Options: options.Index().SetName("outbox_pending")},
		{Keys: bson.D{{Key: fSpawnsN, Value: 1}}, Options: options.Index().SetName("spawns_pending")},
		{Keys: bson.D{{Key: fTimerMin, Value: 1}}, Options: options.Index().SetName("timers_due").SetSparse(true)},
		{Keys: bson.D{{Key: fDefinition, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_definition")},
		{Keys: bson.D{{Key: fStatus, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_status")},
		{Keys: bson.D{{Key: fParent, Value: 1}, {Key: fID, Value: 1}}, Options: options.Index().SetName("list_parent")},
	}
}

// EnsureIndexes creates the indexes if they are missing; creating an existing index is a
// no-op, so every process may call it at start. One createIndexes per index: FerretDB 1.24.2
// drops the connection on a createIndexes that names several indexes some of which exist.
func EnsureIndexes(ctx context.Context, env Env) error {
	for _, m := range indexes() {
		if _, err := env.Executions.Indexes().CreateOne(ctx, m); err != nil {
			return fmt.Errorf("execstore: creating index on %v: %w", m.Keys, err)
		}
	}
	return nil
}
