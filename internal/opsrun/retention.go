package opsrun

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/internal/unique"
	"github.com/execstore/execstore/ops"
)

// ExpiredIn reads up to limit executions of partitions past their retention (ops.ExpiredScan):
// one find on ops.IndexFinished.
func ExpiredIn(ctx context.Context, env Env, partitions []int, cutoffs map[execstore.Status]time.Time, limit int) ([]execstore.FinishedExecution, error) {
	if len(partitions) == 0 || len(cutoffs) == 0 {
		return nil, nil
	}
	scan := ops.ExpiredScan(partitions, cutoffs)
	opts := options.Find().SetProjection(ops.ExpiredProjection()).SetHint(scan.Hint)
	if limit > 0 {
		opts.SetLimit(int64(limit))
	}
	cur, err := env.Executions.Find(ctx, scan.Filter, opts)
	if err != nil {
		return nil, outcome.ReadFailure("expired executions", "", err)
	}
	var docs []ops.ExpiredDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, outcome.ReadFailure("expired executions", "", err)
	}
	out := make([]execstore.FinishedExecution, len(docs))
	for i, d := range docs {
		out[i] = execstore.FinishedExecution{ID: d.ID, Status: execstore.Status(d.Status), FinishedAt: utc(d.FinishedAt),
			Version: d.Version, ParentID: deref(d.ParentID)}
	}
	return out, nil
}

// DeleteExpired deletes expired with one deleteMany per status among them
// (ops.DeleteExpiredCommand), then adds what each deleted to the retention's counting document
// (ops.CountDeletedCommand). A status whose delete failed is left out of the counts, and the
// failures are joined.
func DeleteExpired(ctx context.Context, env Env, expired []execstore.FinishedExecution, cutoffs map[execstore.Status]time.Time) (map[execstore.Status]int64, error) {
	byStatus := map[execstore.Status][]execstore.FinishedExecution{}
	for _, e := range expired {
		if _, ok := cutoffs[e.Status]; ok {
			byStatus[e.Status] = append(byStatus[e.Status], e)
		}
	}
	deleted := map[execstore.Status]int64{}
	var errs []error
	for _, s := range slices.Sorted(maps.Keys(byStatus)) {
		res, err := env.Executions.DeleteMany(ctx, ops.DeleteExpiredCommand(byStatus[s], map[execstore.Status]time.Time{s: cutoffs[s]}))
		if err != nil {
			errs = append(errs, outcome.WriteFailure("delete expired", byStatus[s][0].ID, err))
			continue
		}
		if res.DeletedCount > 0 {
			deleted[s] = res.DeletedCount
		}
	}
	if len(deleted) > 0 {
		if err := countDeleted(ctx, env, deleted); err != nil {
			errs = append(errs, err)
		}
	}
	return deleted, errors.Join(errs...)
}

// countDeleted adds deleted to the counting document, created first when it is missing: the
// first count of a collection is an update that matches nothing, an insert, and the update
// again.
func countDeleted(ctx context.Context, env Env, deleted map[execstore.Status]int64) error {
	filter, update := ops.CountDeletedCommand(env.Executions.Name(), deleted, ops.CommitTime())
	for range 2 {
		res, err := env.Counters.UpdateOne(ctx, filter, update)
		if err != nil {
			return outcome.WriteFailureOf("retention totals", "count deleted", env.Executions.Name(), err)
		}
		if res.MatchedCount > 0 {
			return nil
		}
		if err := RecordRetention(ctx, env); err != nil {
			return err
		}
	}
	return nil
}

// RecordRetention creates the retention's counting document of env.Executions, unless it
// exists (ops.RetentionDocument): an insert, whose duplicate-key refusal means it exists.
func RecordRetention(ctx context.Context, env Env) error {
	_, err := env.Counters.InsertOne(ctx, ops.RetentionDocument(env.Executions.Name()))
	if err == nil || unique.IsDuplicateKey(err) {
		return nil
	}
	return outcome.WriteFailureOf("retention totals", "create", env.Executions.Name(), err)
}

// RetentionTotals reads the retention's counting document of env.Executions: zero totals when
// there is none yet.
func RetentionTotals(ctx context.Context, env Env) (execstore.RetentionTotals, error) {
	var doc struct {
		Deleted map[string]int64 `bson:"deleted"`
		LastAt  time.Time        `bson:"last_at"`
	}
	totals := execstore.RetentionTotals{Deleted: map[execstore.Status]int64{}}
	err := env.Counters.FindOne(ctx, bson.D{{Key: "_id", Value: ops.RetentionID(env.Executions.Name())}}).Decode(&doc)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return totals, nil
	}
	if err != nil {
		return totals, outcome.ReadFailure("retention totals", "", err)
	}
	for s, n := range doc.Deleted {
		totals.Deleted[execstore.Status(s)] = n
	}
	totals.LastAt = utc(doc.LastAt)
	return totals, nil
}
