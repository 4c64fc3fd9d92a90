package ops

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
)

// LoadForEventPipeline is the MongoDB formulation of LoadForEvent: one aggregation that
// matches the document by _id and projects the snapshot together with a server-side $in over
// the dedupe set, so the set itself never leaves the server.
func LoadForEventPipeline(env Env, id, eventID string) mongo.Pipeline {
	project := bson.D{}
	project = append(project, loadProjection...)
	project = append(project, bson.E{Key: "hit", Value: bson.D{{Key: "$in", Value: bson.A{
		literal(eventID), dedupeSetExpr(env),
	}}}})
	return mongo.Pipeline{
		{{Key: "$match", Value: bson.D{{Key: fID, Value: id}}}},
		{{Key: "$project", Value: project}},
	}
}

// LoadForEvent returns the execution and whether eventID is in its dedupe set, in one round
// trip of latency. On MongoDB it runs LoadForEventPipeline. FerretDB has no aggregation $in,
// so there it issues two finds at once: the load, and a find of the version at which the
// document did not yet hold eventID (UnprocessedFilter). Their answers are combined so that
// "not processed" is only reported for the very version returned; a version that moved between
// the two reads is read again, and a missing "not yet processed" answer is confirmed.
func LoadForEvent(ctx context.Context, env Env, id, eventID string) (*execstore.Execution, bool, error) {
	if env.Profile != FerretDB {
		return loadForEventAggregate(ctx, env, id, eventID)
	}
	const attempts = 5
	for range attempts {
		exe, hit, settled, err := loadForEventFinds(ctx, env, id, eventID)
		if err != nil || settled {
			return exe, hit, err
		}
	}
	return nil, false, fmt.Errorf("execstore: load for event of %q: the execution kept changing under %d reads", id, attempts)
}

func loadForEventAggregate(ctx context.Context, env Env, id, eventID string) (*execstore.Execution, bool, error) {
	cur, err := env.Executions.Aggregate(ctx, LoadForEventPipeline(env, id, eventID))
	if err != nil {
		return nil, false, readFailure("load for event", id, err)
	}
	var docs []execDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, false, readFailure("load for event", id, err)
	}
	if len(docs) == 0 {
		return nil, false, nil
	}
	return docs[0].execution(), docs[0].Hit, nil
}

func loadForEventFinds(ctx context.Context, env Env, id, eventID string) (exe *execstore.Execution, hit, settled bool, err error) {
	var (
		doc, open       execDoc
		docErr, openErr error
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		docErr = env.Executions.FindOne(gctx, LoadFilter(id), options.FindOne().SetProjection(loadProjection)).Decode(&doc)
		return ignoreNoDocuments(docErr)
	})
	g.Go(func() error {
		openErr = env.Executions.FindOne(gctx, UnprocessedFilter(env, id, eventID),
			options.FindOne().SetProjection(bson.D{{Key: fVersion, Value: 1}})).Decode(&open)
		return ignoreNoDocuments(openErr)
	})
	if err := g.Wait(); err != nil {
		return nil, false, false, readFailure("load for event", id, err)
	}
	if docErr != nil { // no document
		return nil, false, true, nil
	}
	if openErr != nil {
		// No version without eventID was seen. That proves it processed only if the document
		// existed when that find ran: it may have been created since. Ask directly.
		hit, err := IsProcessed(ctx, env, id, eventID)
		if err != nil {
			return nil, false, false, err
		}
		if hit {
			return doc.execution(), true, true, nil
		}
		return nil, false, false, nil // read the pair again
	}
	if open.Version != doc.Version {
		return nil, false, false, nil
	}
	return doc.execution(), false, true, nil
}

func ignoreNoDocuments(err error) error {
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	return err
}
