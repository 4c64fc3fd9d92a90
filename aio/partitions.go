package aio

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
)

var _ execstore.Partitioned = (*Store)(nil)

// Partitions returns the number of partitions the store's executions are divided into: the
// one its database records (see Options.Partitions).
func (s *Store) Partitions() int { return s.env.Partitions }

// PendingOutboxIn is PendingOutbox restricted to the sources in partitions. A partition out
// of [0, Partitions()) is refused with execstore.ErrInvalid before any I/O. A partition named
// twice counts once. An empty list returns nothing, with no I/O.
func (s *Store) PendingOutboxIn(ctx context.Context, partitions []int, limit int) ([]execstore.OutboxEntry, error) {
	parts, err := s.checkScan(partitions, limit)
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	return submit(ctx, s, opPendingOutbox, "", func(ctx context.Context) ([]execstore.OutboxEntry, error) {
		return opsrun.PendingOutbox(ctx, s.env, parts, limit)
	}).Wait(ctx)
}

// PendingSpawnsIn is PendingSpawns restricted to the parents in partitions, with the checks
// of PendingOutboxIn.
func (s *Store) PendingSpawnsIn(ctx context.Context, partitions []int, limit int) ([]execstore.SpawnEntry, error) {
	parts, err := s.checkScan(partitions, limit)
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	return submit(ctx, s, opPendingSpawns, "", func(ctx context.Context) ([]execstore.SpawnEntry, error) {
		return opsrun.PendingSpawns(ctx, s.env, parts, limit)
	}).Wait(ctx)
}

// DueTimersIn is DueTimers restricted to the executions in partitions, with the checks of
// PendingOutboxIn.
func (s *Store) DueTimersIn(ctx context.Context, partitions []int, now time.Time, limit int) ([]execstore.DueTimer, error) {
	if err := contract.ValidateFireTime("now", now); err != nil {
		return nil, err
	}
	parts, err := s.checkScan(partitions, limit)
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	return submit(ctx, s, opDueTimers, "", func(ctx context.Context) ([]execstore.DueTimer, error) {
		return opsrun.DueTimers(ctx, s.env, parts, now, limit)
	}).Wait(ctx)
}

// checkScan checks a partitioned scan's arguments and returns its partitions sorted, each
// once.
func (s *Store) checkScan(partitions []int, limit int) ([]int, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	return contract.ValidatePartitions("partitions", partitions, s.env.Partitions)
}
