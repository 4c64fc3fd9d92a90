package opsrun

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// PendingSpawns returns up to limit pending spawn intents (0: all) of the parents in
// partitions in relay order, as PendingOutbox does.
func PendingSpawns(ctx context.Context, env Env, partitions []int, limit int) ([]execstore.SpawnEntry, error) {
	byParent, err := pendingEntries[ops.SpawnDoc](ctx, env, ops.PendingSpawnsScan(partitions), ops.FieldSpawns, "pending spawns")
	if err != nil {
		return nil, err
	}
	var all []execstore.SpawnEntry
	var order []ordered
	for parent, docs := range byParent {
		for _, d := range docs {
			m, err := contract.DecodeMap(d.Context)
			if err != nil {
				return nil, outcome.ReadFailure("pending spawns", parent, err)
			}
			order = append(order, ordered{source: parent, version: d.Version, seq: d.Seq, pos: len(all)})
			all = append(all, execstore.SpawnEntry{
				Seq: d.Seq, ParentID: parent, ChildID: d.ChildID, RootPath: d.RootPath, Context: m,
				CommittedAt: utc(d.At), Attempts: attemptsOf(d.Failures)})
		}
	}
	order = limitTo(relayOrder(order), limit)
	out := make([]execstore.SpawnEntry, len(order))
	for i, o := range order {
		out[i] = all[o.pos]
	}
	return out, nil
}
