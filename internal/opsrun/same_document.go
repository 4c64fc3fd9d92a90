package opsrun

import (
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// A document's writes in one statement: on the MongoDB formulation, the idempotent writes of
// one bulk write that remove different paths of one document (acks of its entries, deletes
// of its fired timers) go in one updateOne. Its filter is the document's _id and every
// write's guard; its update unsets every path and decrements each count by the number of its
// acks. A row-locking engine rewrites the document once instead of once a write. The
// statement changes the document only when every guard holds, at once, and then exactly as
// the writes one after the other would. When it matches nothing, its writes are sent again
// one by one (sameDocumentRetry): a write whose guard no longer holds matches nothing, as it
// would have alone, and repeating a write that was applied is harmless.

// documentStatement is the updateOne of writes, all of one document, each removing its own
// path (see sameDocumentGroups).
func documentStatement(writes []IdempotentWrite) (filter, update bson.D) {
	filter = bson.D{{Key: fID, Value: writes[0].ID}}
	unset := make(bson.D, 0, len(writes))
	var inc bson.D
	for _, w := range writes {
		filter = append(filter, w.Filter[1:]...)
		unset = append(unset, bson.E{Key: w.merge.path, Value: ""})
		if c := w.merge.count; c != "" {
			found := false
			for i := range inc {
				if inc[i].Key == c {
					inc[i].Value = inc[i].Value.(int64) - 1
					found = true
				}
			}
			if !found {
				inc = append(inc, bson.E{Key: c, Value: int64(-1)})
			}
		}
	}
	update = bson.D{{Key: "$unset", Value: unset}}
	if len(inc) > 0 {
		update = append(update, bson.E{Key: "$inc", Value: inc})
	}
	return filter, update
}

// sameDocumentGroups splits order, the writes' indexes in the global order, into the
// statements of a bulk write: consecutive writes of one document, each removing a path none
// before it in the group removes, share a statement; any other write has its own. The
// statements follow the global order.
func sameDocumentGroups(writes []IdempotentWrite, order []int) [][]int {
	var groups [][]int
	var paths map[string]bool
	for _, i := range order {
		w := writes[i]
		if n := len(groups); n > 0 {
			last := groups[n-1]
			first := writes[last[0]]
			if first.ID == w.ID && first.merge.path != "" && w.merge.path != "" && !paths[w.merge.path] {
				groups[n-1] = append(last, i)
				paths[w.merge.path] = true
				continue
			}
		}
		groups = append(groups, []int{i})
		paths = map[string]bool{w.merge.path: true}
	}
	return groups
}

// sameDocumentModels is the bulk write of writes in groups (sameDocumentGroups): an updateOne
// a group, of one write's own command or of its document's statement (documentStatement).
func sameDocumentModels(writes []IdempotentWrite, groups [][]int) []mongo.WriteModel {
	models := make([]mongo.WriteModel, len(groups))
	for k, g := range groups {
		if len(g) == 1 {
			w := writes[g[0]]
			models[k] = mongo.NewUpdateOneModel().SetFilter(w.Filter).SetUpdate(w.Update)
			continue
		}
		ws := make([]IdempotentWrite, len(g))
		for j, i := range g {
			ws[j] = writes[i]
		}
		filter, update := documentStatement(ws)
		models[k] = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update)
	}
	return models
}
