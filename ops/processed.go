package ops

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// IsProcessed reports whether eventID is in the dedupe set of id. One find projecting _id.
func IsProcessed(ctx context.Context, env Env, id, eventID string) (bool, error) {
	err := env.Executions.FindOne(ctx, ProcessedFilter(env, id, eventID),
		options.FindOne().SetProjection(bson.D{{Key: fID, Value: 1}})).Err()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return false, nil
	}
	if err != nil {
		return false, readFailure("is processed", id, err)
	}
	return true, nil
}
