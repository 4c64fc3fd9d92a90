package opsrun

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/server"
)

// DocumentWrites runs writes, idempotent writes of one document (the acks and timer deletes
// that waited for one execution), and returns each one's outcome. On the MongoDB formulation
// they are one updateOne (documentStatement), so that a row-locking engine rewrites the
// document once instead of once a write. That statement changes the document only when every
// write's guard holds, at once, and then exactly as the writes one after the other would:
// when it matched, every write was applied by it; when it matched nothing, or the server
// refused it, none was, and the writes go out as IdempotentWrites, each changing the document
// by its own guard alone. When one of the writes is a timer delete, the statement goes in
// two forms (sendDocumentStatement), so that the delete of the execution's last timer removes
// its hint too. An answer that never came leaves every write's outcome unknown. On
// the FerretDB formulation, or when they cannot share one statement (two writes of one path,
// more than mergedLimit of them), they go out as IdempotentWritesChunked, at most max a bulk.
func DocumentWrites(ctx context.Context, env Env, writes []IdempotentWrite, max int) []error {
	if env.Profile == server.FerretDB || !oneStatement(writes) {
		return IdempotentWritesChunked(ctx, env, writes, max)
	}
	if err := ctx.Err(); err != nil {
		errs := make([]error, len(writes))
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	filter, update := documentStatement(writes)
	matched, err := sendDocumentStatement(ctx, env, writes, filter, update)
	switch {
	case matched == 1 && (err == nil || outcome.Classify(err) == outcome.WriteErrors):
		return make([]error, len(writes)) // one statement applied every write
	case err == nil, outcome.Classify(err) == outcome.WriteErrors:
		return IdempotentWrites(ctx, env, writes)
	}
	errs := make([]error, len(writes))
	for i, w := range writes {
		errs[i] = outcome.WriteFailure(w.Op, w.ID, err)
	}
	return errs
}

// oneStatement reports whether writes may share one statement: several, at most mergedLimit,
// all of one document, each removing a path of its own.
func oneStatement(writes []IdempotentWrite) bool {
	if len(writes) < 2 || len(writes) > mergedLimit {
		return false
	}
	paths := make(map[string]bool, len(writes))
	for _, w := range writes {
		if w.ID != writes[0].ID || w.merge.path == "" || paths[w.merge.path] {
			return false
		}
		paths[w.merge.path] = true
	}
	return true
}

// documentStatement is the updateOne of writes, all of one document, each removing a path of
// its own (oneStatement): its filter is the document's _id and every write's guard, its
// update unsets every path (and the fields unset with it) and lowers each count by the number of writes that lower it.
func documentStatement(writes []IdempotentWrite) (filter, update bson.D) {
	filter = bson.D{{Key: fID, Value: writes[0].ID}}
	unset := make(bson.D, 0, len(writes))
	var inc bson.D
	for _, w := range writes {
		filter = append(filter, w.Filter[1:]...)
		unset = append(unset, bson.E{Key: w.merge.path, Value: ""})
		for _, f := range w.merge.also {
			unset = append(unset, bson.E{Key: f, Value: ""})
		}
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

// sendDocumentStatement sends the statement of writes (documentStatement) and returns how
// many documents it matched. When exactly one of writes is a timer delete, the statement
// goes as an ordered bulk write of two forms, as IdempotentWrites sends a timer delete: the
// first matches only while that timer is the execution's only one and removes the hint with
// it, the second only while another timer is stored beside it. Every other guard is in both,
// so at most one of them matches, and it applies every write.
func sendDocumentStatement(ctx context.Context, env Env, writes []IdempotentWrite, filter, update bson.D) (int64, error) {
	var timer *timerRef
	for _, w := range writes {
		if w.lastTimer != nil {
			if timer != nil {
				timer = nil // several: no one of them is known to be the last
				break
			}
			timer = w.lastTimer
		}
	}
	if timer == nil {
		res, err := env.Executions.UpdateOne(ctx, filter, update)
		if res == nil {
			return 0, err
		}
		return res.MatchedCount, err
	}
	lastFilter, besidesFilter, lastUpdate := timer.merged(filter, update)
	res, err := env.Executions.BulkWrite(ctx, []mongo.WriteModel{
		mongo.NewUpdateOneModel().SetFilter(lastFilter).SetUpdate(lastUpdate),
		mongo.NewUpdateOneModel().SetFilter(besidesFilter).SetUpdate(update),
	}, options.BulkWrite().SetOrdered(true))
	if res == nil {
		return 0, err
	}
	return res.MatchedCount, err
}
