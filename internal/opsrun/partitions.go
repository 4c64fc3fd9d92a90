package opsrun

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/unique"
	"github.com/execstore/execstore/ops"
)

// RecordPartitions returns the number of partitions of env.Executions, recording it when none
// is: asked, or execstore.DefaultPartitions when asked is 0. It is recorded by an insert of
// ops.PartitionsDocument into env.Counters. A duplicate-key refusal means a number is
// recorded, and it is read back. When asked is not 0 and differs from the recorded number,
// it fails with an *execstore.InvalidError on field, and nothing is written.
func RecordPartitions(ctx context.Context, env Env, field string, asked int) (int, error) {
	n := asked
	if n == 0 {
		n = execstore.DefaultPartitions
	}
	name := env.Executions.Name()
	_, err := env.Counters.InsertOne(ctx, ops.PartitionsDocument(name, n))
	if err == nil {
		return n, nil
	}
	if !unique.IsDuplicateKey(err) {
		return 0, fmt.Errorf("execstore: recording the partitions of %s: %w", name, err)
	}
	var doc struct {
		N int `bson:"partitions"`
	}
	err = env.Counters.FindOne(ctx, bson.D{{Key: "_id", Value: ops.PartitionsID(name)}}).Decode(&doc)
	if err != nil {
		return 0, fmt.Errorf("execstore: reading the partitions of %s: %w", name, err)
	}
	if doc.N <= 0 || doc.N > execstore.MaxPartitions {
		return 0, fmt.Errorf("execstore: the partitions of %s are recorded as %d, not in [1, %d]", name, doc.N, execstore.MaxPartitions)
	}
	if asked != 0 && asked != doc.N {
		return 0, contract.Invalid(field, "the database records %d partitions for %s, asked for %d: the number is set once per database",
			doc.N, name, asked)
	}
	return doc.N, nil
}

// assignBatch is how many documents one bulk write of AssignPartitions gives their partition.
// Below FerretDB's limit of 100 updates a bulk.
const assignBatch = 64

// AssignPartitions gives every document of env.Executions written without a partition its
// partition among env.Partitions, and returns how many it gave one. Batches of ids are read in
// _id order, and each is one unordered bulk write of ops.AssignPartitionCommand in that order
// (see statementOrder). A document given its partition meanwhile, by another process, is
// matched by nothing. It returns when a find finds none. It fails when a batch's writes
// matched nothing and the next find returns the same first id: the server did not apply them.
func AssignPartitions(ctx context.Context, env Env) (int, error) {
	total := 0
	stuck := "" // the first id of a batch whose writes matched nothing
	for {
		cur, err := env.primary().Find(ctx, ops.MissingPartitionFilter(), options.Find().
			SetProjection(bson.D{{Key: fID, Value: 1}}).SetSort(bson.D{{Key: fID, Value: 1}}).SetLimit(assignBatch))
		if err != nil {
			return total, fmt.Errorf("execstore: finding executions without a partition: %w", err)
		}
		var docs []struct {
			ID string `bson:"_id"`
		}
		if err := cur.All(ctx, &docs); err != nil {
			return total, fmt.Errorf("execstore: finding executions without a partition: %w", err)
		}
		if len(docs) == 0 {
			return total, nil
		}
		if stuck != "" && docs[0].ID == stuck {
			return total, fmt.Errorf("execstore: giving executions their partition: the updates of %q and the ids after it matched nothing", stuck)
		}
		models := make([]mongo.WriteModel, len(docs))
		for i, d := range docs {
			filter, update := ops.AssignPartitionCommand(d.ID, env.Partitions)
			models[i] = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update)
		}
		res, err := env.Executions.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
		if err != nil {
			return total, fmt.Errorf("execstore: giving executions their partition: %w", err)
		}
		stuck = ""
		if res.MatchedCount == 0 {
			stuck = docs[0].ID
		}
		total += int(res.ModifiedCount)
	}
}

// dropObsoleteIndexes drops ops.ObsoleteIndexes where present: those one listIndexes names,
// or every one of them when it fails. An index another process drops meanwhile is missing
// (dropIndex takes that as done); one an earlier version creates after the list is dropped
// by the next Open.
func dropObsoleteIndexes(ctx context.Context, env Env) error {
	names := ops.ObsoleteIndexes()
	if present, err := indexNames(ctx, env); err == nil {
		names = slices.DeleteFunc(names, func(name string) bool { return !present[name] })
	}
	for _, name := range names {
		if err := dropIndex(ctx, env, name); err != nil {
			return err
		}
	}
	return nil
}

// indexNames returns the names of env.Executions' indexes, by one listIndexes.
func indexNames(ctx context.Context, env Env) (map[string]bool, error) {
	cur, err := env.Executions.Indexes().List(ctx)
	if err != nil {
		return nil, err
	}
	var specs []struct {
		Name string `bson:"name"`
	}
	if err := cur.All(ctx, &specs); err != nil {
		return nil, err
	}
	names := make(map[string]bool, len(specs))
	for _, s := range specs {
		names[s.Name] = true
	}
	return names, nil
}

// dropIndex drops the index name of env.Executions where present. A server answers a missing
// index with IndexNotFound (code 27).
func dropIndex(ctx context.Context, env Env, name string) error {
	err := env.Executions.Indexes().DropOne(ctx, name)
	var ce mongo.CommandError
	if err != nil && !(errors.As(err, &ce) && (ce.Code == 27 || ce.Name == "IndexNotFound")) {
		return fmt.Errorf("execstore: dropping index %s: %w", name, err)
	}
	return nil
}
