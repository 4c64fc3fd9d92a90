package ops

import (
	"context"
	"errors"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
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
	if env.Profile != execstore.FerretDB {
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

// dedupeDoc is an executions document read together with its dedupe set.
type dedupeDoc struct {
	Exec execDoc   `bson:",inline"`
	Set  dedupeSet `bson:",inline"`
}

// dedupeSet is the dedupe set as stored: one of the fields or the other two (see dedupe.go).
type dedupeSet struct {
	Processed  []string `bson:"processed"`
	Processed0 []string `bson:"processed_0"`
	Processed1 []string `bson:"processed_1"`
}

// holds reports whether eventID is in the dedupe set, as processedFilter would match it.
func (d *dedupeSet) holds(eventID string) bool {
	return slices.Contains(d.Processed, eventID) || slices.Contains(d.Processed0, eventID) ||
		slices.Contains(d.Processed1, eventID)
}

// loadWithDedupeSet finds the document by _id with the fields of projection and the dedupe
// set; nil, nil when there is none.
func loadWithDedupeSet(ctx context.Context, env Env, id string, projection bson.D) (*dedupeDoc, error) {
	return findWithDedupeSet(ctx, env.Executions, env, id, projection)
}

// findWithDedupeSet is loadWithDedupeSet on coll.
func findWithDedupeSet(ctx context.Context, coll *mongo.Collection, env Env, id string, projection bson.D) (*dedupeDoc, error) {
	p := slices.Clone(projection)
	for _, f := range dedupeFields(env) {
		p = append(p, bson.E{Key: f, Value: 1})
	}
	var d dedupeDoc
	err := coll.FindOne(ctx, loadFilter(id), options.FindOne().SetProjection(p)).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}
