package ops

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

// The dedupe set. Without a window (Env.DedupeWindow 0) it is the array processed, grown with
// $addToSet and never trimmed. With a window W it is two arrays, processed_0 and processed_1,
// that take turns by generation of W versions: the commit that creates version v records its
// event id in processed_<(v/W)%2>, and the first commit of a generation (v%W == 0) resets that
// array, dropping the ids of two generations ago. So the set always holds the ids of at least
// the last W commits and of at most the last 2W, trimmed in the same atomic update that adds,
// with $set and $addToSet alone (FerretDB ignores $slice). Every store on a database must use
// the same window.
const (
	fProcessed0 = "processed_0"
	fProcessed1 = "processed_1"
)

func dedupeFields(env Env) []string {
	if env.DedupeWindow <= 0 {
		return []string{fProcessed}
	}
	return []string{fProcessed0, fProcessed1}
}

// processedFilter matches the execution only if eventID is in its dedupe set.
func processedFilter(env Env, id, eventID string) bson.D {
	fields := dedupeFields(env)
	if len(fields) == 1 {
		return bson.D{{Key: fID, Value: id}, {Key: fields[0], Value: eventID}}
	}
	or := make(bson.A, len(fields))
	for i, f := range fields {
		or[i] = bson.D{{Key: f, Value: eventID}}
	}
	return bson.D{{Key: fID, Value: id}, {Key: "$or", Value: or}}
}

// dedupeGuard returns the filter elements that match the execution only if eventID ("" for
// none) is not in its dedupe set: {processed: {$ne: id}}, or one such element for each
// generation array when the window is on. An absent array matches, as an empty one would.
func dedupeGuard(env Env, eventID string) bson.D {
	if eventID == "" {
		return nil
	}
	fields := dedupeFields(env)
	guard := make(bson.D, len(fields))
	for i, f := range fields {
		guard[i] = bson.E{Key: f, Value: bson.D{{Key: "$ne", Value: eventID}}}
	}
	return guard
}

// hitExpr is the aggregation expression of whether event (an expression) is in the dedupe
// set, computed on the server so that the set never leaves it.
func hitExpr(env Env, event any) bson.D {
	return bson.D{{Key: "$in", Value: bson.A{event, dedupeSetExpr(env)}}}
}

// dedupeSetExpr is the aggregation expression of the whole dedupe set, [] when absent.
func dedupeSetExpr(env Env) any {
	fields := dedupeFields(env)
	arrays := make(bson.A, len(fields))
	for i, f := range fields {
		arrays[i] = bson.D{{Key: "$ifNull", Value: bson.A{"$" + f, bson.A{}}}}
	}
	if len(arrays) == 1 {
		return arrays[0]
	}
	return bson.D{{Key: "$concatArrays", Value: arrays}}
}

// dedupeUpdate returns how the commit creating newVersion records eventID ("" for none): a
// $set of the generation's array when the commit starts a generation, else an $addToSet.
func dedupeUpdate(env Env, newVersion int64, eventID string) (set, addToSet bson.D) {
	if env.DedupeWindow <= 0 {
		if eventID == "" {
			return nil, nil
		}
		return nil, bson.D{{Key: fProcessed, Value: eventID}}
	}
	field := fProcessed0
	gen, starts := contract.DedupeGeneration(newVersion, env.DedupeWindow)
	if gen == 1 {
		field = fProcessed1
	}
	if starts {
		ids := bson.A{}
		if eventID != "" {
			ids = append(ids, eventID)
		}
		return bson.D{{Key: field, Value: ids}}, nil
	}
	if eventID == "" {
		return nil, nil
	}
	return nil, bson.D{{Key: field, Value: eventID}}
}

// dedupeInsert returns the dedupe fields of a new document at version 1.
func dedupeInsert(env Env, eventID string) bson.D {
	ids := bson.A{}
	if eventID != "" {
		ids = append(ids, eventID)
	}
	if env.DedupeWindow <= 0 {
		return bson.D{{Key: fProcessed, Value: ids}}
	}
	d := bson.D{{Key: fProcessed, Value: bson.A{}}, {Key: fProcessed0, Value: bson.A{}}, {Key: fProcessed1, Value: bson.A{}}}
	if gen, _ := contract.DedupeGeneration(1, env.DedupeWindow); gen == 1 {
		d[2].Value = ids
	} else {
		d[1].Value = ids
	}
	return d
}

// literal wraps a caller's value for an aggregation expression, where a string starting with
// "$" would otherwise be read as a field path or a variable.
func literal(v any) bson.D { return bson.D{{Key: "$literal", Value: v}} }
