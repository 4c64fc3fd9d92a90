package aio

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
)

// ExpiredIn returns up to limit executions of the partitions past their retention (see
// execstore.Retaining). Cost: one find on the index of finished executions, which holds only
// the executions ever finished, unsorted: it stops at limit.
func (s *Store) ExpiredIn(ctx context.Context, partitions []int, cutoffs map[execstore.Status]time.Time, limit int) ([]execstore.FinishedExecution, error) {
	if err := s.checkRetention(partitions, cutoffs, limit); err != nil {
		return nil, err
	}
	return submit(ctx, s, opExpired, "", func(ctx context.Context) ([]execstore.FinishedExecution, error) {
		return opsrun.ExpiredIn(ctx, s.env, partitions, cutoffs, limit)
	}).Wait(ctx)
}

// DeleteExpired deletes each of expired still as it was read (see execstore.Retaining). Cost:
// one deleteMany per status among them, then one update of the retention's totals (an insert
// more the first time).
func (s *Store) DeleteExpired(ctx context.Context, expired []execstore.FinishedExecution, cutoffs map[execstore.Status]time.Time) (map[execstore.Status]int64, error) {
	if err := contract.ValidateExpired(expired); err != nil {
		return nil, err
	}
	if err := s.checkRetention(nil, cutoffs, 0); err != nil {
		return nil, err
	}
	if len(expired) == 0 {
		return map[execstore.Status]int64{}, nil
	}
	return submit(ctx, s, opDeleteExpired, "", func(ctx context.Context) (map[execstore.Status]int64, error) {
		deleted, err := opsrun.DeleteExpired(ctx, s.env, expired, cutoffs)
		for _, e := range expired {
			s.forget(e.ID)
		}
		return deleted, err
	}).Wait(ctx)
}

// RetentionTotals returns what retention deleted from the store's collection (see
// execstore.Retaining). Cost: one find of one document.
func (s *Store) RetentionTotals(ctx context.Context) (execstore.RetentionTotals, error) {
	return submit(ctx, s, opRetentionTotals, "", func(ctx context.Context) (execstore.RetentionTotals, error) {
		return opsrun.RetentionTotals(ctx, s.env)
	}).Wait(ctx)
}

// checkRetention refuses with ErrInvalid, before any I/O, partitions out of range, a
// status in cutoffs that does not finish, and a negative limit.
func (s *Store) checkRetention(partitions []int, cutoffs map[execstore.Status]time.Time, limit int) error {
	if _, err := contract.ValidatePartitions("partitions", partitions, s.env.Partitions); err != nil {
		return err
	}
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return err
	}
	return contract.ValidateCutoffs(cutoffs)
}

var _ execstore.Retaining = (*Store)(nil)
