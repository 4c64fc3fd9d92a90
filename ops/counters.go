package ops

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Counter names in the counters collection.
const (
	OutboxCounter = "outbox"
	SpawnCounter  = "spawn"
)

// reserveCommand is the findAndModify that reserves n seqs of counter name.
func reserveCommand(name string, n int64) (filter, update bson.D) {
	return bson.D{{Key: fID, Value: name}}, bson.D{{Key: "$inc", Value: bson.D{{Key: "n", Value: n}}}}
}

// Reserve atomically reserves the n seqs (last-n, last] of counter name and returns last.
// One findAndModify (upsert, returning the document after the increment). Seqs are unique
// across every process sharing the database.
func Reserve(ctx context.Context, env Env, name string, n int64) (int64, error) {
	filter, update := reserveCommand(name, n)
	var doc struct {
		N int64 `bson:"n"`
	}
	err := env.Counters.FindOneAndUpdate(ctx, filter, update,
		options.FindOneAndUpdate().SetUpsert(true).SetReturnDocument(options.After)).Decode(&doc)
	if err != nil {
		return 0, fmt.Errorf("execstore: reserving %d %s seqs: %w", n, name, err)
	}
	return doc.N, nil
}
