package opsrun

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/server"
)

// IsProcessed reports whether eventID is in the dedupe set of id. One find: on MongoDB of
// processedFilter, projecting _id; on FerretDB, whose SQLite backend scans the collection for
// any filter but _id alone, of the document by _id with its dedupe set.
func IsProcessed(ctx context.Context, env Env, id, eventID string) (bool, error) {
	if env.Profile == server.FerretDB {
		d, err := loadWithDedupeSet(ctx, env, id, bson.D{{Key: fID, Value: 1}})
		if err != nil {
			return false, outcome.ReadFailure("is processed", id, err)
		}
		return d != nil && d.Set.holds(eventID), nil
	}
	err := env.Executions.FindOne(ctx, processedFilter(env, id, eventID),
		options.FindOne().SetProjection(bson.D{{Key: fID, Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, outcome.ReadFailure("is processed", id, err)
	}
	return true, nil
}
