package memstore

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

var _ execstore.Targeted = (*Store)(nil)

// PendingOutboxOf is PendingOutbox restricted to the sources ids. An invalid id, or more than
// execstore.MaxTargetedIDs of them, is refused with execstore.ErrInvalid. An empty list
// returns nothing.
func (s *Store) PendingOutboxOf(ctx context.Context, ids []string, limit int) ([]execstore.OutboxEntry, error) {
	in, err := checkTargets(ids, limit)
	if err != nil || in == nil {
		return nil, err
	}
	return s.pendingOutbox(ctx, in, limit)
}

// DueTimersOf is DueTimers restricted to the executions ids, with the checks of
// PendingOutboxOf.
func (s *Store) DueTimersOf(ctx context.Context, ids []string, now time.Time, limit int) ([]execstore.DueTimer, error) {
	if err := contract.ValidateFireTime("now", now); err != nil {
		return nil, err
	}
	in, err := checkTargets(ids, limit)
	if err != nil || in == nil {
		return nil, err
	}
	return s.dueTimers(ctx, in, now, limit)
}

// checkTargets checks a targeted read's arguments, as the MongoDB store does, and returns
// whether an execution id is one of ids; nil for an empty list.
func checkTargets(ids []string, limit int) (func(id string) bool, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	sorted, err := contract.ValidateTargets("ids", ids)
	if err != nil || len(sorted) == 0 {
		return nil, err
	}
	set := make(map[string]bool, len(sorted))
	for _, id := range sorted {
		set[id] = true
	}
	return func(id string) bool { return set[id] }, nil
}
