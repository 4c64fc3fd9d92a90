package ops

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
)

// loadProjection is what a load reads: the snapshot and the top-level fields, never the
// embedded outbox, spawns, timers, dedupe set or trace.
var loadProjection = bson.D{
	{Key: fDefinition, Value: 1},
	{Key: fStatus, Value: 1},
	{Key: fParent, Value: 1},
	{Key: fVersion, Value: 1},
	{Key: fData, Value: 1},
	{Key: fTraceNext, Value: 1},
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

func (d *execDoc) execution() *execstore.Execution {
	data := d.Data
	if data == nil {
		data = []byte{}
	}
	return &execstore.Execution{
		ID:           d.ID,
		DefinitionID: d.DefinitionID,
		Status:       execstore.Status(d.Status),
		ParentID:     deref(d.ParentID),
		Version:      d.Version,
		Data:         data,
		TraceNext:    d.TraceNext,
	}
}
