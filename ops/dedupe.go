package ops

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

// The dedupe set. Without a window (Layout.DedupeWindow 0) it is the array processed, grown with
// $addToSet and never trimmed. With a window W it is two arrays, processed_0 and processed_1,
// that take turns by generation of W versions: the commit that creates version v records its
// event id in processed_<(v/W)%2>, and the first commit of a generation (v%W == 0) resets that
// array, dropping the ids of two generations ago. So the set always holds the ids of at least
// the last W commits and of at most the last 2W, trimmed in the same atomic update that adds,
// with $set and $addToSet alone (FerretDB ignores $slice). Every store on a database must use
// the same window.

// DedupeFields returns the fields that hold the dedupe set under l: "processed" when there
// is no window, else "processed_0" and "processed_1". An event id is in the set when it is in
// any of them. An absent field holds none.
func (l Layout) DedupeFields() []string {
	if l.DedupeWindow <= 0 {
		return []string{fProcessed}
	}
	return []string{fProcessed0, fProcessed1}
}

// dedupeGuard returns the filter elements that match the execution only if eventID ("" for
// none) is not in its dedupe set: {processed: {$ne: id}}, or one such element for each
// generation array when the window is on. An absent array matches, as an empty one would.
func dedupeGuard(l Layout, eventID string) bson.D {
	if eventID == "" {
		return nil
	}
	fields := l.DedupeFields()
	guard := make(bson.D, len(fields))
	for i, f := range fields {
		guard[i] = bson.E{Key: f, Value: bson.D{{Key: "$ne", Value: eventID}}}
	}
	return guard
}

// dedupeUpdate returns how the commit creating newVersion records eventID ("" for none): a
// $set of the generation's array when the commit starts a generation, else an $addToSet.
func dedupeUpdate(l Layout, newVersion int64, eventID string) (set, addToSet bson.D) {
	if l.DedupeWindow <= 0 {
		if eventID == "" {
			return nil, nil
		}
		return nil, bson.D{{Key: fProcessed, Value: eventID}}
	}
	field := fProcessed0
	gen, starts := contract.DedupeGeneration(newVersion, l.DedupeWindow)
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
func dedupeInsert(l Layout, eventID string) bson.D {
	ids := bson.A{}
	if eventID != "" {
		ids = append(ids, eventID)
	}
	if l.DedupeWindow <= 0 {
		return bson.D{{Key: fProcessed, Value: ids}}
	}
	d := bson.D{{Key: fProcessed, Value: bson.A{}}, {Key: fProcessed0, Value: bson.A{}}, {Key: fProcessed1, Value: bson.A{}}}
	if gen, _ := contract.DedupeGeneration(1, l.DedupeWindow); gen == 1 {
		d[2].Value = ids
	} else {
		d[1].Value = ids
	}
	return d
}
