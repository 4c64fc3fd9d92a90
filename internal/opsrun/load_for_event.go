package opsrun

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/server"
)

// loadForEventPipeline is the MongoDB formulation of LoadForEvent: one aggregation that
// matches the document by _id and projects the snapshot together with a server-side $in over
// the dedupe set, so the set itself never leaves the server.
func loadForEventPipeline(env Env, id, eventID string) mongo.Pipeline {
	project := bson.D{}
	project = append(project, loadProjection...)
	project = append(project, bson.E{Key: "hit", Value: hitExpr(env, literal(eventID))})
	return mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: fID, Value: id}}}},
		{{Key: "$project", Value: project}},
	}
}

// LoadForEvent returns the execution and whether eventID is in its dedupe set, in one round
// trip. On MongoDB it runs loadForEventPipeline, so the dedupe set never leaves the server.
// FerretDB has no aggregation $in, so there it is one find by _id that also returns the
// dedupe set, and the membership test runs here. Both read one document at one version, so
// the verdict always belongs to the execution returned. (A find by _id alone is also the
// only filter FerretDB's SQLite backend serves from the primary key; a filter on the dedupe
// set would scan the collection.)
func LoadForEvent(ctx context.Context, env Env, id, eventID string) (*execstore.Execution, bool, error) {
	if env.Profile != server.FerretDB {
		return loadForEventAggregate(ctx, env, id, eventID)
	}
	d, err := loadWithDedupeSet(ctx, env, id, loadProjection)
	if err != nil {
		return nil, false, outcome.ReadFailure("load for event", id, err)
	}
	if d == nil {
		return nil, false, nil
	}
	return d.Exec.execution(), d.Set.holds(eventID), nil
}

func loadForEventAggregate(ctx context.Context, env Env, id, eventID string) (*execstore.Execution, bool, error) {
	cur, err := env.Executions.Aggregate(ctx, loadForEventPipeline(env, id, eventID))
	if err != nil {
		return nil, false, outcome.ReadFailure("load for event", id, err)
	}
	var docs []execDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, false, outcome.ReadFailure("load for event", id, err)
	}
	if len(docs) == 0 {
		return nil, false, nil
	}
	return docs[0].execution(), docs[0].Hit, nil
}
