package opsrun

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/ops"
)

// PendingOutbox returns up to limit undelivered outbox entries (0: all) of the sources in
// partitions in relay order: oldest seq first, each source's entries in commit order.
// partitions must be distinct and in range; the whole store's scan passes them all.
func PendingOutbox(ctx context.Context, env Env, partitions []int, limit int) ([]execstore.OutboxEntry, error) {
	return pendingOutbox(ctx, env, ops.PendingOutboxScan(partitions), limit)
}

// PendingOutboxOf is PendingOutbox restricted to the sources ids, read by their _id
// (ops.PendingOutboxScanOf). ids must be distinct.
func PendingOutboxOf(ctx context.Context, env Env, ids []string, limit int) ([]execstore.OutboxEntry, error) {
	return pendingOutbox(ctx, env, ops.PendingOutboxScanOf(ids), limit)
}

// PendingOutboxExcept is PendingOutbox without the entries of the sources except
// (ops.Except). except must be distinct.
func PendingOutboxExcept(ctx context.Context, env Env, partitions []int, except []string, limit int) ([]execstore.OutboxEntry, error) {
	return pendingOutbox(ctx, env, ops.Except(ops.PendingOutboxScan(partitions), except), limit)
}

// pendingOutbox returns up to limit entries of the documents scan selects, in relay order.
func pendingOutbox(ctx context.Context, env Env, scan ops.Scan, limit int) ([]execstore.OutboxEntry, error) {
	bySource, err := pendingEntries[ops.OutboxDoc](ctx, env, scan, ops.FieldOutbox, "pending outbox")
	if err != nil {
		return nil, err
	}
	var all []execstore.OutboxEntry
	var order []ordered
	for source, docs := range bySource {
		for _, d := range docs {
			order = append(order, ordered{source: source, version: d.Version, seq: d.Seq, pos: len(all)})
			all = append(all, execstore.OutboxEntry{
				Seq: d.Seq, SourceID: source, Version: d.Version, TargetID: deref(d.TargetID), Event: nonNil(d.Event),
				CommittedAt: utc(d.At), Attempts: attemptsOf(d.Failures)})
		}
	}
	order = limitTo(relayOrder(order), limit)
	out := make([]execstore.OutboxEntry, len(order))
	for i, o := range order {
		out[i] = all[o.pos]
	}
	return out, nil
}
