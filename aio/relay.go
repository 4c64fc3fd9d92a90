package aio

import (
	"context"
	"errors"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
)

// PendingOutbox returns up to limit undelivered outbox entries (0: all) in relay order.
func (s *Store) PendingOutbox(ctx context.Context, limit int) ([]execstore.OutboxEntry, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	return submit(ctx, s, opPendingOutbox, "", func(ctx context.Context) ([]execstore.OutboxEntry, error) {
		return opsrun.PendingOutbox(ctx, s.env, ops.AllPartitions(s.env.Partitions), limit)
	}).Wait(ctx)
}

// AckOutbox removes exactly outbox entry seq of sourceID; idempotent.
func (s *Store) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	if err := contract.ValidateID("sourceID", sourceID); err != nil {
		return err
	}
	if s.carrier != nil && !s.closing.Load() {
		return s.carrier.ack(ctx, sourceID, seq)
	}
	return s.ackAlone(ctx, sourceID, seq)
}

// PendingSpawns returns up to limit pending spawn intents (0: all) in relay order.
func (s *Store) PendingSpawns(ctx context.Context, limit int) ([]execstore.SpawnEntry, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	return submit(ctx, s, opPendingSpawns, "", func(ctx context.Context) ([]execstore.SpawnEntry, error) {
		return opsrun.PendingSpawns(ctx, s.env, ops.AllPartitions(s.env.Partitions), limit)
	}).Wait(ctx)
}

// AckSpawn removes exactly spawn intent seq of parentID; idempotent.
func (s *Store) AckSpawn(ctx context.Context, parentID string, seq int64) error {
	if err := contract.ValidateID("parentID", parentID); err != nil {
		return err
	}
	return s.idempotentWrite(ctx, opAckSpawn, opsrun.SpawnAckWrite(parentID, seq))
}

// DueTimers returns up to limit timers (0: all) with FireAt at or before now, earliest first.
func (s *Store) DueTimers(ctx context.Context, now time.Time, limit int) ([]execstore.DueTimer, error) {
	if err := contract.ValidateFireTime("now", now); err != nil {
		return nil, err
	}
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	return submit(ctx, s, opDueTimers, "", func(ctx context.Context) ([]execstore.DueTimer, error) {
		return opsrun.DueTimers(ctx, s.env, ops.AllPartitions(s.env.Partitions), now, limit)
	}).Wait(ctx)
}

// DeleteTimer removes the timer at path only if it still fires at fireAt, and reports whether
// it did.
func (s *Store) DeleteTimer(ctx context.Context, id, path string, fireAt time.Time) (bool, error) {
	if err := contract.ValidateTimerRef(contract.DeleteTimerFields, id, path, fireAt); err != nil {
		return false, err
	}
	return submit(ctx, s, opDeleteTimer, id, func(ctx context.Context) (bool, error) {
		return opsrun.DeleteTimer(ctx, s.env, id, path, fireAt)
	}).Wait(ctx)
}

// DeleteTimers removes each of timers only if it still fires at its FireAt and, when its
// Version is positive, is still the arming of that Version (execstore.DueTimer.Version), so
// a re-arm of its path to the same fire time survives. Unlike DeleteTimer it does not say
// which timers it removed. Each delete waits up to
// Options.AckWait for the next commit of its execution through this store, which removes the
// timer in its own write, as an ack does (see AckOutbox and the package doc): guarded by the
// timer still firing at FireAt as that arming, or by the commit's own re-arm or cancel of its
// path. The
// others go out in one bulk write per batch.
func (s *Store) DeleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	if err := contract.ValidateDueTimers(timers); err != nil {
		return err
	}
	if len(timers) == 0 {
		return nil
	}
	if s.carrier != nil && !s.closing.Load() {
		return s.carrier.deleteTimers(ctx, timers)
	}
	return s.deleteTimersAlone(ctx, timers)
}

// deleteTimersAlone deletes timers in one bulk write per batch, guarded as DeleteTimers.
func (s *Store) deleteTimersAlone(ctx context.Context, timers []execstore.DueTimer) error {
	_, err := s.deleteTimersAloneAsync(ctx, timers).Wait(ctx)
	return err
}

func (s *Store) deleteTimersAloneAsync(ctx context.Context, timers []execstore.DueTimer) *Future[struct{}] {
	writes := make([]opsrun.IdempotentWrite, len(timers))
	for i, t := range timers {
		writes[i] = opsrun.DeleteTimerWrite(t.ExecutionID, t.Path, t.FireAt, t.Version)
	}
	return submit(ctx, s, opDeleteTimer, "", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, errors.Join(opsrun.IdempotentWritesChunked(ctx, s.env, writes, s.opts.MaxBatch)...)
	})
}
