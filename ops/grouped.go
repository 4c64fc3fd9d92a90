package ops

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
)

// IdempotentWrite is one guarded update whose repetition is harmless (an ack): applying it
// twice leaves the document as applying it once.
type IdempotentWrite struct {
	Op     string // "ack outbox", "ack spawn"
	ID     string
	Filter bson.D
	Update bson.D
}

// OutboxAckWrite is AckOutbox as an IdempotentWrite.
func OutboxAckWrite(sourceID string, seq int64) IdempotentWrite {
	return IdempotentWrite{Op: "ack outbox", ID: sourceID, Filter: outboxField.AckFilter(sourceID, seq), Update: outboxField.AckUpdate(seq)}
}

// SpawnAckWrite is AckSpawn as an IdempotentWrite.
func SpawnAckWrite(parentID string, seq int64) IdempotentWrite {
	return IdempotentWrite{Op: "ack spawn", ID: parentID, Filter: spawnsField.AckFilter(parentID, seq), Update: spawnsField.AckUpdate(seq)}
}

// DeleteTimerWrite is DeleteTimer as an IdempotentWrite.
func DeleteTimerWrite(id, path string, fireAt float64) IdempotentWrite {
	return IdempotentWrite{Op: "delete timer", ID: id, Filter: deleteTimerFilter(id, path, fireAt), Update: deleteTimerUpdate(path)}
}

// RunIdempotentWrites runs writes as one unordered bulk write and returns each one's outcome.
// Since each write is idempotent, a write that matched nothing is done too (its entry was
// already gone). When the server refused part of the bulk (its per-operation error indexes
// are not reliable on every server), every write is run again alone, which is harmless, and
// reports its own result. Any other error is classified as for a single write (see
// outcome.Classify): a refusal of the whole command is reported to every write, and a bulk write
// whose answer never came back, or proves nothing, leaves every write's outcome unknown.
func RunIdempotentWrites(ctx context.Context, env Env, writes []IdempotentWrite) []error {
	errs := make([]error, len(writes))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	_, err := env.Executions.BulkWrite(ctx, idempotentModels(writes), options.BulkWrite().SetOrdered(false))
	if err == nil {
		return errs
	}
	if outcome.Classify(err) == outcome.WriteErrors {
		for i, w := range writes {
			if _, err := env.Executions.UpdateOne(ctx, w.Filter, w.Update); err != nil {
				errs[i] = outcome.WriteFailure(w.Op, w.ID, err)
			}
		}
		return errs
	}
	for i, w := range writes {
		errs[i] = outcome.WriteFailure(w.Op, w.ID, err)
	}
	return errs
}

// idempotentModels is the bulk write of writes, its statements in the global order (see
// statementOrder): by _id, then by operation and filter.
func idempotentModels(writes []IdempotentWrite) []mongo.WriteModel {
	order := statementOrder(len(writes), func(i int) string { return writes[i].ID }, func(i, j int) int {
		return compareStatements(writes[i].Op, writes[i].Filter, writes[j].Op, writes[j].Filter)
	})
	models := make([]mongo.WriteModel, len(writes))
	for k, i := range order {
		models[k] = mongo.NewUpdateOneModel().SetFilter(writes[i].Filter).SetUpdate(writes[i].Update)
	}
	return models
}

// RunIdempotentWritesChunked runs writes in bulk writes of at most max each, one after the
// other, and returns each write's outcome. The chunks follow the global statement order too.
func RunIdempotentWritesChunked(ctx context.Context, env Env, writes []IdempotentWrite, max int) []error {
	order := statementOrder(len(writes), func(i int) string { return writes[i].ID }, func(i, j int) int {
		return compareStatements(writes[i].Op, writes[i].Filter, writes[j].Op, writes[j].Filter)
	})
	errs := make([]error, len(writes))
	for len(order) > 0 {
		n := min(max, len(order))
		chunk := make([]IdempotentWrite, n)
		for k, i := range order[:n] {
			chunk[k] = writes[i]
		}
		for k, err := range RunIdempotentWrites(ctx, env, chunk) {
			errs[order[k]] = err
		}
		order = order[n:]
	}
	return errs
}

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
