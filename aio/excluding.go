package aio

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
)

var _ execstore.Excluding = (*Store)(nil)

// PendingOutboxExcept is PendingOutboxIn without the entries of the sources except: one find
// on the pending-outbox index, the documents except names left out by the server. An invalid
// id in except, or more than execstore.MaxTargetedIDs of them, is refused with
// execstore.ErrInvalid before any I/O, as are PendingOutboxIn's bad arguments.
func (s *Store) PendingOutboxExcept(ctx context.Context, partitions []int, except []string, limit int) ([]execstore.OutboxEntry, error) {
	parts, left, err := s.checkExcept(partitions, except, limit)
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	return submit(ctx, s, opPendingOutbox, "", func(ctx context.Context) ([]execstore.OutboxEntry, error) {
		return opsrun.PendingOutboxExcept(ctx, s.env, parts, left, limit)
	}).Wait(ctx)
}

// checkExcept checks a scan's arguments (checkScan) and the executions it leaves out, and
// returns both sorted, each once.
func (s *Store) checkExcept(partitions []int, except []string, limit int) ([]int, []string, error) {
	parts, err := s.checkScan(partitions, limit)
	if err != nil {
		return nil, nil, err
	}
	left, err := contract.ValidateTargets("except", except)
	if err != nil {
		return nil, nil, err
	}
	return parts, left, nil
}
