package opsrun

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// loadProjection is what a load reads: the snapshot and the top-level fields, never the
// embedded outbox, spawns, timers, dedupe set or trace.
var loadProjection = bson.D{
	{Key: ops.FieldDefinitionID, Value: 1},
	{Key: ops.FieldStatus, Value: 1},
	{Key: ops.FieldParentID, Value: 1},
	{Key: ops.FieldVersion, Value: 1},
	{Key: ops.FieldData, Value: 1},
	{Key: ops.FieldTraceNext, Value: 1},
}

// loadFilter is the filter of Load: the document by _id.
func loadFilter(id string) bson.D { return bson.D{{Key: fID, Value: id}} }

// Load reads one execution, or nil when there is none. One find.
func Load(ctx context.Context, env Env, id string) (*execstore.Execution, error) {
	var d execDoc
	err := env.Executions.FindOne(ctx, loadFilter(id), options.FindOne().SetProjection(loadProjection)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, outcome.ReadFailure("load", id, err)
	}
	return d.execution(), nil
}
