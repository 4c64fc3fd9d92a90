package memstore

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

var _ execstore.Excluding = (*Store)(nil)

// PendingOutboxExcept is PendingOutboxIn without the entries of the sources except. An
// invalid id in except, or more than execstore.MaxTargetedIDs of them, is refused with
// execstore.ErrInvalid, as are PendingOutboxIn's bad arguments.
func (s *Store) PendingOutboxExcept(ctx context.Context, partitions []int, except []string, limit int) ([]execstore.OutboxEntry, error) {
	in, err := s.checkExcept(partitions, except, limit)
	if err != nil || in == nil {
		return nil, err
	}
	return s.pendingOutbox(ctx, in, limit)
}

// checkExcept checks a scan's arguments (checkScan) and the executions it leaves out, and
// returns whether an execution id is in partitions and not left out; nil for no partition.
func (s *Store) checkExcept(partitions []int, except []string, limit int) (func(id string) bool, error) {
	in, err := s.checkScan(partitions, limit)
	if err != nil {
		return nil, err
	}
	left, err := contract.ValidateTargets("except", except)
	if err != nil || in == nil {
		return nil, err
	}
	out := make(map[string]bool, len(left))
	for _, id := range left {
		out[id] = true
	}
	return func(id string) bool { return in(id) && !out[id] }, nil
}
