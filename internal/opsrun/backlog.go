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
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// Backlog reads the work waiting in every partition at now with one aggregation
// (ops.BacklogPipeline). A server that refuses the aggregation's operators as ones it lacks
// answers one find of the same documents instead (backlogProjection), folded here to the
// same figures. Partitions with nothing waiting are left out; the rest come in partition
// order.
func Backlog(ctx context.Context, env Env, now time.Time) ([]execstore.PartitionBacklog, error) {
	rows, err := backlogAggregate(ctx, env, now)
	if LacksOperators(err) {
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
func backlogOf(rows []backlogRow, now time.Time, err error) ([]execstore.PartitionBacklog, error) {
	if err != nil {
		return nil, outcome.ReadFailure("backlog", "", err)
	}
	byPartition := map[int32]*backlogRow{}
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
		if r.PendingOutbox == 0 && r.PendingSpawns == 0 && r.DueTimers == 0 && r.Dead == 0 {
			// Its documents matched by a hint alone: a timer hint left stale (not repaired
			// on FerretDB, see DueTimers) with no timer due behind it. Nothing waits there.
			continue
		}
		b := execstore.PartitionBacklog{Partition: int(p), Now: now, PendingOutbox: r.PendingOutbox,
			PendingSpawns: r.PendingSpawns, OldestPending: utc(r.OldestPending), DueTimers: r.DueTimers, Dead: r.Dead}
		if r.OldestDue != nil {
			b.OldestDue, _ = contract.TimeFromStored(*r.OldestDue)
		}
		out = append(out, b)
	}
	return out, nil
}

func backlogAggregate(ctx context.Context, env Env, now time.Time) ([]backlogRow, error) {
	cur, err := env.Executions.Aggregate(ctx, ops.BacklogPipeline(now))
	if err != nil {
		return nil, err
	}
	var rows []backlogRow
	if err := cur.All(ctx, &rows); err != nil {
		return nil, err
	}
	return rows, nil
}

func backlogFind(ctx context.Context, env Env, now time.Time) ([]backlogRow, error) {
	cur, err := env.Executions.Find(ctx, ops.BacklogFilter(now), options.Find().SetProjection(backlogProjection()))
	if err != nil {
		return nil, err
	}
	defer cur.Close(ctx)
	byPartition := map[int32]*backlogRow{}
	for cur.Next(ctx) {
		if err := foldBacklog(byPartition, cur.Current, now); err != nil {
			return nil, err
		}
	}
	if err := cur.Err(); err != nil {
		return nil, err
	}
	rows := make([]backlogRow, 0, len(byPartition))
	for _, r := range byPartition {
		rows = append(rows, *r)
	}
	return rows, nil
}

// LacksOperators reports whether err is a server's refusal of an aggregation for an operator
// or stage it does not have: NotImplemented (FerretDB), InvalidPipelineOperator and
// unrecognized expressions (MongoDB's codes for an unknown operator).
func LacksOperators(err error) bool {
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
func merge(a, b *backlogRow) {
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

// backlogRow is one partition's row of ops.BacklogPipeline, or the fold of the documents
// of the find that stands in for it (backlogProjection).
type backlogRow struct {
	Partition     *int32    `bson:"_id"` // nil: the documents written without a partition
	PendingOutbox int64     `bson:"outbox"`
	PendingSpawns int64     `bson:"spawns"`
	Dead          int64     `bson:"dead"`
	OldestPending time.Time `bson:"oldest,omitempty"`
	DueTimers     int64     `bson:"due"`
	OldestDue     *float64  `bson:"oldest_due"` // stored seconds; nil when none is due
}

// backlogProjection is the projection of the find of BacklogFilter that stands in for
// ops.BacklogPipeline where a server lacks its operators: each document's partition, counts,
// entries, intents and timers, folded by the caller (foldBacklog). It reads the entries whole,
// events and contexts included.
func backlogProjection() bson.D {
	p := bson.D{}
	for _, f := range []string{ops.FieldPartition, "outbox_n", "spawns_n", "dead_n", ops.FieldOutbox, ops.FieldSpawns, ops.FieldTimers} {
		p = append(p, bson.E{Key: f, Value: 1})
	}
	return p
}

// foldBacklog adds doc, one document of BacklogProjection's find, to rows, the rows of
// ops.BacklogPipeline by partition, as the pipeline would count it at now.
func foldBacklog(rows map[int32]*backlogRow, doc bson.Raw, now time.Time) error {
	var d struct {
		Partition *int32                   `bson:"partition"`
		OutboxN   int64                    `bson:"outbox_n"`
		SpawnsN   int64                    `bson:"spawns_n"`
		DeadN     int64                    `bson:"dead_n"`
		Outbox    map[string]ops.OutboxDoc `bson:"outbox"`
		Spawns    map[string]ops.SpawnDoc  `bson:"spawns"`
		Timers    map[string]float64       `bson:"timers"`
	}
	if err := bson.Unmarshal(doc, &d); err != nil {
		return err
	}
	var p int32 // a document without a partition is in partition 0
	if d.Partition != nil {
		p = *d.Partition
	}
	row := rows[p]
	if row == nil {
		row = &backlogRow{Partition: &p}
		rows[p] = row
	}
	row.PendingOutbox += d.OutboxN
	row.PendingSpawns += d.SpawnsN
	row.Dead += d.DeadN
	older := func(at time.Time) {
		if !at.IsZero() && (row.OldestPending.IsZero() || at.Before(row.OldestPending)) {
			row.OldestPending = at
		}
	}
	for _, e := range d.Outbox {
		older(e.At)
	}
	for _, s := range d.Spawns {
		older(s.At)
	}
	limit := contract.StoredTime(now)
	for _, at := range d.Timers {
		if at > limit {
			continue
		}
		row.DueTimers++
		if row.OldestDue == nil || at < *row.OldestDue {
			row.OldestDue = &at
		}
	}
	return nil
}
