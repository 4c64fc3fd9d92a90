package aio

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
)

var _ execstore.Targeted = (*Store)(nil)

// PendingOutboxOf is PendingOutbox restricted to the sources ids: one find of their documents
// by _id, whatever the pending-work indexes hold. An invalid id, or more than
// execstore.MaxTargetedIDs of them, is refused with execstore.ErrInvalid before any I/O. An id
// named twice counts once. An empty list returns nothing, with no I/O.
func (s *Store) PendingOutboxOf(ctx context.Context, ids []string, limit int) ([]execstore.OutboxEntry, error) {
	targets, err := checkTargets(ids, limit)
	if err != nil || len(targets) == 0 {
		return nil, err
	}
	return submit(ctx, s, opPendingOutbox, "", func(ctx context.Context) ([]execstore.OutboxEntry, error) {
		return opsrun.PendingOutboxOf(ctx, s.env, targets, limit)
	}).Wait(ctx)
}

// DueTimersOf is DueTimers restricted to the executions ids, with the checks of
// PendingOutboxOf: one find of their documents by _id.
func (s *Store) DueTimersOf(ctx context.Context, ids []string, now time.Time, limit int) ([]execstore.DueTimer, error) {
	if err := contract.ValidateFireTime("now", now); err != nil {
		return nil, err
	}
	targets, err := checkTargets(ids, limit)
	if err != nil || len(targets) == 0 {
		return nil, err
	}
	return submit(ctx, s, opDueTimers, "", func(ctx context.Context) ([]execstore.DueTimer, error) {
		return opsrun.DueTimersOf(ctx, s.env, targets, now, limit)
	}).Wait(ctx)
}

// checkTargets checks a targeted read's arguments and returns its ids sorted, each once.
func checkTargets(ids []string, limit int) ([]string, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	return contract.ValidateTargets("ids", ids)
}
