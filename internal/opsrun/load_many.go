package opsrun

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
)

// LoadMany reads the executions ids in one find (_id $in), projecting what Load does; an
// absent id maps to nil.
func LoadMany(ctx context.Context, env Env, ids []string) (map[string]*execstore.Execution, error) {
	in := make(bson.A, len(ids))
	for i, id := range ids {
		in[i] = id
	}
	cur, err := env.Executions.Find(ctx, bson.D{{Key: fID, Value: bson.D{{Key: "$in", Value: in}}}},
		options.Find().SetProjection(loadProjection))
	if err != nil {
		return nil, outcome.ReadFailure("load", "", err)
	}
	var docs []execDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, outcome.ReadFailure("load", "", err)
	}
	out := make(map[string]*execstore.Execution, len(ids))
	for i := range docs {
		out[docs[i].ID] = docs[i].execution()
	}
	return out, nil
}

// loadForEventsPipeline is the MongoDB formulation of many LoadForEvent calls at once, for
// distinct ids: one aggregation that matches the documents by _id $in and projects, for each,
// the snapshot and a server-side $in of its own event id over its dedupe set. The event id of
// a document is picked from the parallel arrays by the document's position in ids.
func loadForEventsPipeline(env Env, ids, eventIDs []string) mongo.Pipeline {
	idArr := make(bson.A, len(ids))
	evArr := make(bson.A, len(eventIDs))
	for i := range ids {
		idArr[i], evArr[i] = ids[i], eventIDs[i]
	}
	event := bson.D{{Key: "$arrayElemAt", Value: bson.A{literal(evArr), bson.D{{Key: "$indexOfArray", Value: bson.A{literal(idArr), "$" + fID}}}}}}
	project := bson.D{}
	project = append(project, loadProjection...)
	project = append(project, bson.E{Key: "hit", Value: hitExpr(env, event)})
	return mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: fID, Value: bson.D{{Key: "$in", Value: idArr}}}}}},
		{{Key: "$project", Value: project}},
	}
}

// LoadedForEvent is one answer of LoadForEvents.
type LoadedForEvent struct {
	Execution *execstore.Execution // nil for an unknown id
	Processed bool
}

// LoadForEvents runs loadForEventsPipeline (MongoDB only; ids must be distinct) and returns
// the answers by id.
func LoadForEvents(ctx context.Context, env Env, ids, eventIDs []string) (map[string]LoadedForEvent, error) {
	cur, err := env.Executions.Aggregate(ctx, loadForEventsPipeline(env, ids, eventIDs))
	if err != nil {
		return nil, outcome.ReadFailure("load for event", "", err)
	}
	var docs []execDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, outcome.ReadFailure("load for event", "", err)
	}
	out := make(map[string]LoadedForEvent, len(ids))
	for i := range docs {
		out[docs[i].ID] = LoadedForEvent{Execution: docs[i].execution(), Processed: docs[i].Hit}
	}
	return out, nil
}
