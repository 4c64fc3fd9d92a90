package memstore

import (
	"context"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

var _ execstore.Retaining = (*Store)(nil)

// ExpiredIn returns up to limit executions of the partitions past their retention (see
// execstore.Retaining), oldest finish first.
func (s *Store) ExpiredIn(ctx context.Context, partitions []int, cutoffs map[execstore.Status]time.Time, limit int) ([]execstore.FinishedExecution, error) {
	in, err := s.checkScan(partitions, limit)
	if err != nil {
		return nil, err
	}
	if err := contract.ValidateCutoffs(cutoffs); err != nil {
		return nil, err
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	held := s.holding()
	var out []execstore.FinishedExecution
	for _, id := range s.ids {
		r := s.execs[id]
		if in(id) && s.expired(r, cutoffs, held) {
			out = append(out, execstore.FinishedExecution{ID: id, Status: r.exe.Status, FinishedAt: r.finishedAt,
				Version: r.exe.Version, ParentID: r.exe.ParentID})
		}
	}
	slices.SortStableFunc(out, func(a, b execstore.FinishedExecution) int { return a.FinishedAt.Compare(b.FinishedAt) })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// DeleteExpired deletes each of expired still as it was read, under the store's write lock
// (see execstore.Retaining).
func (s *Store) DeleteExpired(ctx context.Context, expired []execstore.FinishedExecution, cutoffs map[execstore.Status]time.Time) (map[execstore.Status]int64, error) {
	if err := contract.ValidateExpired(expired); err != nil {
		return nil, err
	}
	if err := contract.ValidateCutoffs(cutoffs); err != nil {
		return nil, err
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	held := s.holding()
	deleted := map[execstore.Status]int64{}
	for _, e := range expired {
		r := s.execs[e.ID]
		if r == nil || r.exe.Version != e.Version || r.exe.Status != e.Status || !s.expired(r, cutoffs, held) {
			continue
		}
		delete(s.execs, e.ID)
		if i := sort.SearchStrings(s.ids, e.ID); i < len(s.ids) && s.ids[i] == e.ID {
			s.ids = slices.Delete(s.ids, i, i+1)
		}
		deleted[e.Status]++
	}
	if len(deleted) > 0 {
		if s.retained == nil {
			s.retained = map[execstore.Status]int64{}
		}
		for st, n := range deleted {
			s.retained[st] += n
		}
		s.retainedAt = ops.CommitTime()
	}
	return deleted, nil
}

// RetentionTotals returns what DeleteExpired deleted since New.
func (s *Store) RetentionTotals(ctx context.Context) (execstore.RetentionTotals, error) {
	if err := s.rlock(ctx); err != nil {
		return execstore.RetentionTotals{}, err
	}
	defer s.mu.RUnlock()
	deleted := map[execstore.Status]int64{}
	maps.Copy(deleted, s.retained)
	return execstore.RetentionTotals{Deleted: deleted, LastAt: s.retainedAt}, nil
}

// holding returns the executions that hold a pending entry or intent or a dead item. The
// caller holds mu.
func (s *Store) holding() map[string]bool {
	held := map[string]bool{}
	for _, e := range s.outbox.entries {
		held[e.source] = true
	}
	for _, e := range s.spawns.entries {
		held[e.source] = true
	}
	for _, d := range s.dead {
		held[d.ExecutionID] = true
	}
	return held
}

// expired reports whether r is finished past its status's cutoff and holds nothing (held:
// holding's answer). The caller holds mu.
func (s *Store) expired(r *record, cutoffs map[execstore.Status]time.Time, held map[string]bool) bool {
	cutoff, ok := cutoffs[r.exe.Status]
	return ok && !r.finishedAt.IsZero() && !r.finishedAt.After(cutoff) && len(r.timers) == 0 && !held[r.exe.ID]
}
