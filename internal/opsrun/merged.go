package opsrun

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// mergedLimit bounds the writes one merged statement applies: its $or has one branch each.
const mergedLimit = 96

// removal is what lets an idempotent write share one updateMany with others of its kind: it
// removes one field (path) of its document, guarded by its own filter, and decrements a
// count by one (count, "" for none). Writes of one kind (same count, and for a timer delete
// the same path) may be merged.
//
// The FerretDB formulation merges them, because FerretDB 1.x narrows a statement to one
// document by its _id only when the filter is that _id alone, and otherwise reads every
// document of the collection to evaluate it: a bulk of one guarded statement per write reads
// the collection once per write, a merged statement once (idem's RenewAll does the same).
type removal struct {
	kind  string
	path  string
	also  []string // the fields unset with path: a timer's arming version
	count string
}

// mergedStatement is the updateMany that applies writes, all of one kind and each of a
// different document, in one statement: its filter is each write's own filter under $or
// (each names its document's _id, so a document matches only by its own write's guard) and
// an _id $in that lets a server with an _id index read those documents alone; its update
// unsets every write's path (and the fields unset with it) and decrements the count by one. A matched document matched
// exactly one write (one write per document), so the count drops by one, as that write's
// own update would. The other writes' paths are absent from it: an ack's path names its
// entry's seq, and a seq is reserved once per database (ops.ReserveCommand), so no document
// holds another's; a timer delete's path is the kind's, the same for every write.
func mergedStatement(writes []IdempotentWrite) (filter, update bson.D) {
	ids := make(bson.A, len(writes))
	each := make(bson.A, len(writes))
	unset := make(bson.D, 0, len(writes))
	seen := make(map[string]bool, len(writes))
	for i, w := range writes {
		ids[i] = w.ID
		each[i] = w.Filter
		for _, f := range append([]string{w.merge.path}, w.merge.also...) {
			if !seen[f] {
				seen[f] = true
				unset = append(unset, bson.E{Key: f, Value: ""})
			}
		}
	}
	filter = bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}, {Key: "$or", Value: each}}
	update = bson.D{{Key: "$unset", Value: unset}}
	if c := writes[0].merge.count; c != "" {
		update = append(update, bson.E{Key: "$inc", Value: bson.D{{Key: c, Value: int64(-1)}}})
	}
	return filter, update
}

// mergedModels returns the merged statements of writes, in the global order, when every
// write is of one mergeable kind and there are several; otherwise ok is false. Each
// statement takes the next writes in order up to mergedLimit, or up to a write of a document
// it already has: the statements' documents follow the global order too.
func mergedModels(writes []IdempotentWrite, order []int) (models []mongo.WriteModel, ok bool) {
	if len(writes) < 2 {
		return nil, false
	}
	kind := writes[0].merge.kind
	for _, w := range writes {
		if kind == "" || w.merge.kind != kind {
			return nil, false
		}
	}
	var chunk []IdempotentWrite
	has := map[string]bool{}
	flush := func() {
		f, u := mergedStatement(chunk)
		models = append(models, mongo.NewUpdateManyModel().SetFilter(f).SetUpdate(u))
		chunk, has = chunk[:0:0], map[string]bool{}
	}
	for _, i := range order {
		w := writes[i]
		if len(chunk) == mergedLimit || has[w.ID] {
			flush()
		}
		chunk = append(chunk, w)
		has[w.ID] = true
	}
	flush()
	return models, true
}
