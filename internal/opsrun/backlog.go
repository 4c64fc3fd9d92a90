package opsrun

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// Backlog reads the work waiting in every partition at now with one aggregation
// (ops.BacklogPipeline). A server that refuses the aggregation's operators as ones it lacks
// answers one find of the same documents instead (ops.BacklogProjection), folded here to the
// same figures. Partitions with nothing waiting are left out; the rest come in partition
// order.
func Backlog(ctx context.Context, env Env, now time.Time) ([]execstore.PartitionBacklog, error) {
	rows, err := backlogAggregate(ctx, env, now)
	if lacksOperators(err) {
		return BacklogByFind(ctx, env, now)
	}
	return backlogOf(rows, now, err)
}

// BacklogByFind is Backlog's stand-in for a server without the aggregation's operators: one
// find of the documents with work waiting, folded here.
func BacklogByFind(ctx context.Context, env Env, now time.Time) ([]execstore.PartitionBacklog, error) {
	rows, err := backlogFind(ctx, env, now)
	return backlogOf(rows, now, err)
}

// backlogOf is the backlog of rows, by partition, or err as a read failure.
func backlogOf(rows []ops.BacklogDoc, now time.Time, err error) ([]execstore.PartitionBacklog, error) {
	if err != nil {
		return nil, outcome.ReadFailure("backlog", "", err)
	}
	byPartition := map[int32]*ops.BacklogDoc{}
	for i := range rows {
		r := &rows[i]
		var p int32 // the documents without a partition are partition 0's
		if r.Partition != nil {
			p = *r.Partition
		}
		if have := byPartition[p]; have != nil {
			merge(have, r)
			continue
		}
		byPartition[p] = r
	}
	out := make([]execstore.PartitionBacklog, 0, len(byPartition))
	for _, p := range slices.Sorted(maps.Keys(byPartition)) {
		r := byPartition[p]
		b := execstore.PartitionBacklog{Partition: int(p), Now: now, PendingOutbox: r.PendingOutbox,
			PendingSpawns: r.PendingSpawns, OldestPending: utc(r.OldestPending), DueTimers: r.DueTimers, Dead: r.Dead}
		if r.OldestDue != nil {
			b.OldestDue, _ = contract.TimeFromStored(*r.OldestDue)
		}
		out = append(out, b)
	}
	return out, nil
}

func backlogAggregate(ctx context.Context, env Env, now time.Time) ([]ops.BacklogDoc, error) {
	cur, err := env.Executions.Aggregate(ctx, ops.BacklogPipeline(now))
	if err != nil {
		return nil, err
	}
	var rows []ops.BacklogDoc
	if err := cur.All(ctx, &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

func backlogFind(ctx context.Context, env Env, now time.Time) ([]ops.BacklogDoc, error) {
	cur, err := env.Executions.Find(ctx, ops.BacklogFilter(now), options.Find().SetProjection(ops.BacklogProjection()))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	byPartition := map[int32]*ops.BacklogDoc{}
	for cur.Next(ctx) {
		if err := ops.FoldBacklog(byPartition, cur.Current, now); err != nil {
			return nil, err
		}
	}
	if err := cur.Err(); err != nil {
		return nil, err
	}
	rows := make([]ops.BacklogDoc, 0, len(byPartition))
	for _, r := range byPartition {
		rows = append(rows, *r)
	}
	return rows, nil
}

// lacksOperators reports whether err is a server's refusal of an aggregation for an operator
// or stage it does not have: NotImplemented (FerretDB), InvalidPipelineOperator and
// unrecognized expressions (MongoDB's codes for an unknown operator).
func lacksOperators(err error) bool {
	var ce mongo.CommandError
	if !errors.As(err, &ce) {
		return false
	}
	switch ce.Code {
	case 238, 168, 31325, 15952:
		return true
	}
	return false
}

// merge adds row b to a: two rows of one partition, the documents with no partition and
// those in partition 0.
func merge(a, b *ops.BacklogDoc) {
	a.PendingOutbox += b.PendingOutbox
	a.PendingSpawns += b.PendingSpawns
	a.Dead += b.Dead
	a.DueTimers += b.DueTimers
	if !b.OldestPending.IsZero() && (a.OldestPending.IsZero() || b.OldestPending.Before(a.OldestPending)) {
		a.OldestPending = b.OldestPending
	}
	if b.OldestDue != nil && (a.OldestDue == nil || *b.OldestDue < *a.OldestDue) {
		a.OldestDue = b.OldestDue
	}
}
