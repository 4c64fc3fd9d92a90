package memstore

import (
	"context"
	"slices"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

var _ execstore.Partitioned = (*Store)(nil)

// Partitions returns the number of partitions of the store (Options.Partitions).
func (s *Store) Partitions() int { return s.partitions }

// PendingOutboxIn is PendingOutbox restricted to the sources in partitions. A partition out
// of [0, Partitions()) is refused with execstore.ErrInvalid. A partition named twice counts
// once. An empty list returns nothing.
func (s *Store) PendingOutboxIn(ctx context.Context, partitions []int, limit int) ([]execstore.OutboxEntry, error) {
	in, err := s.checkScan(partitions, limit)
	if err != nil || in == nil {
		return nil, err
	}
	return s.pendingOutbox(ctx, in, limit)
}

// pendingOutbox is PendingOutbox restricted to the sources in accepts.
func (s *Store) pendingOutbox(ctx context.Context, in func(id string) bool, limit int) ([]execstore.OutboxEntry, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var out []execstore.OutboxEntry
	for _, e := range s.outbox.pending(0) {
		if limit > 0 && len(out) == limit {
			break
		}
		if in(e.source) {
			out = append(out, execstore.OutboxEntry{Seq: e.seq, SourceID: e.source, Version: e.item.version,
				TargetID: e.item.targetID, Event: cloneBytes(e.item.event), CommittedAt: e.item.at, Attempts: e.attempts})
		}
	}
	return out, nil
}

// PendingSpawnsIn is PendingSpawns restricted to the parents in partitions, with the checks
// of PendingOutboxIn.
func (s *Store) PendingSpawnsIn(ctx context.Context, partitions []int, limit int) ([]execstore.SpawnEntry, error) {
	in, err := s.checkScan(partitions, limit)
	if err != nil || in == nil {
		return nil, err
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var out []execstore.SpawnEntry
	for _, e := range s.spawns.pending(0) {
		if limit > 0 && len(out) == limit {
			break
		}
		if !in(e.source) {
			continue
		}
		m, err := contract.DecodeMap(e.item.context)
		if err != nil {
			return nil, err // never: the store encoded it
		}
		out = append(out, execstore.SpawnEntry{Seq: e.seq, ParentID: e.source, ChildID: e.item.childID, Attempts: e.attempts,
			RootPath: e.item.rootPath, Context: m, CommittedAt: e.item.at})
	}
	return out, nil
}

// DueTimersIn is DueTimers restricted to the executions in partitions, with the checks of
// PendingOutboxIn.
func (s *Store) DueTimersIn(ctx context.Context, partitions []int, now time.Time, limit int) ([]execstore.DueTimer, error) {
	if err := contract.ValidateFireTime("now", now); err != nil {
		return nil, err
	}
	in, err := s.checkScan(partitions, limit)
	if err != nil || in == nil {
		return nil, err
	}
	return s.dueTimers(ctx, in, now, limit)
}

// dueTimers is DueTimers restricted to the executions in accepts.
func (s *Store) dueTimers(ctx context.Context, in func(id string) bool, now time.Time, limit int) ([]execstore.DueTimer, error) {
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var due []execstore.DueTimer
	for id, r := range s.execs {
		if !in(id) {
			continue
		}
		for path, at := range r.timers {
			if fireAt, _ := contract.TimeFromStored(at); !fireAt.After(now) {
				due = append(due, execstore.DueTimer{ExecutionID: id, Path: path, FireAt: fireAt, Attempts: r.timerAttempts(path, at),
					Version: r.timerVersions[path]})
			}
		}
	}
	contract.SortDueTimers(due)
	if limit > 0 && len(due) > limit {
		due = due[:limit]
	}
	return due, nil
}

// checkScan checks a partitioned scan's arguments, as the MongoDB store does, and returns
// whether an execution id is in partitions; nil for an empty list.
func (s *Store) checkScan(partitions []int, limit int) (func(id string) bool, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	parts, err := contract.ValidatePartitions("partitions", partitions, s.partitions)
	if err != nil || len(parts) == 0 {
		return nil, err
	}
	return func(id string) bool {
		_, found := slices.BinarySearch(parts, execstore.PartitionOf(id, s.partitions))
		return found
	}, nil
}
