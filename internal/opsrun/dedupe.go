package opsrun

import (
	"context"
	"errors"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Reading the dedupe set (its layout is ops.Layout.DedupeFields'): on MongoDB the membership
// test runs on the server, so the set never leaves it; FerretDB has no aggregation $in, so
// there the one document read carries its set and the test runs here.

// processedFilter matches the execution only if eventID is in its dedupe set.
func processedFilter(env Env, id, eventID string) bson.D {
	fields := env.DedupeFields()
	if len(fields) == 1 {
		return bson.D{{Key: fID, Value: id}, {Key: fields[0], Value: eventID}}
	}
	or := make(bson.A, len(fields))
	for i, f := range fields {
		or[i] = bson.D{{Key: f, Value: eventID}}
	}
	return bson.D{{Key: fID, Value: id}, {Key: "$or", Value: or}}
}

// hitExpr is the aggregation expression of whether event (an expression) is in the dedupe
// set, computed on the server so that the set never leaves it.
func hitExpr(env Env, event any) bson.D {
	return bson.D{{Key: "$in", Value: bson.A{event, dedupeSetExpr(env)}}}
}

// dedupeSetExpr is the aggregation expression of the whole dedupe set, [] when absent.
func dedupeSetExpr(env Env) any {
	fields := env.DedupeFields()
	arrays := make(bson.A, len(fields))
	for i, f := range fields {
		arrays[i] = bson.D{{Key: "$ifNull", Value: bson.A{"$" + f, bson.A{}}}}
	}
	if len(arrays) == 1 {
		return arrays[0]
	}
	return bson.D{{Key: "$concatArrays", Value: arrays}}
}

// literal wraps a caller's value for an aggregation expression, where a string starting with
// "$" would otherwise be read as a field path or a variable.
func literal(v any) bson.D { return bson.D{{Key: "$literal", Value: v}} }

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
	for _, f := range env.DedupeFields() {
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
