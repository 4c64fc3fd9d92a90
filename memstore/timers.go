package memstore

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// Timers live in each execution's record, one fire time per path, kept as the MongoDB store
// keeps them (float64 seconds), so that both read back the same times; commits set and remove
// them (see apply), sweeps read and delete them here.

// DueTimers returns up to limit timers (0: all) whose fire time is <= now, earliest first.
// Ties go by execution id and then path. It scans every timer of the store.
func (s *Store) DueTimers(ctx context.Context, now time.Time, limit int) ([]execstore.DueTimer, error) {
	if err := contract.ValidateFireTime("now", now); err != nil {
		return nil, err
	}
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	var due []execstore.DueTimer
	for id, r := range s.execs {
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

// DeleteTimer removes the timer at path only if it still fires at fireAt, and reports whether
// it did.
func (s *Store) DeleteTimer(ctx context.Context, id, path string, fireAt time.Time) (bool, error) {
	if err := contract.ValidateTimerRef(contract.DeleteTimerFields, id, path, fireAt); err != nil {
		return false, err
	}
	if err := s.lock(ctx); err != nil {
		return false, err
	}
	defer s.mu.Unlock()
	return s.deleteTimer(id, path, fireAt, 0), nil
}

// DeleteTimers removes each of timers only if it still fires at its FireAt and, when its
// Version is positive, is still the arming of that Version. Every timer is checked first. One bad entry refuses them all, and none is removed. As with the MongoDB
// store, an empty list returns nil before anything else.
func (s *Store) DeleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	if err := contract.ValidateDueTimers(timers); err != nil {
		return err
	}
	if len(timers) == 0 {
		return nil
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	for _, t := range timers {
		s.deleteTimer(t.ExecutionID, t.Path, t.FireAt, t.Version)
	}
	return nil
}

// deleteTimer is the guarded delete, of the arming of version when it is positive; the
// caller holds the lock.
func (s *Store) deleteTimer(id, path string, fireAt time.Time, version int64) bool {
	r := s.execs[id]
	if r == nil {
		return false
	}
	if at, ok := r.timers[path]; !ok || at != contract.StoredTime(fireAt) {
		return false
	}
	if version > 0 && r.timerVersions[path] != version {
		return false // re-armed since, to the same fire time
	}
	delete(r.timers, path)
	delete(r.timerVersions, path)
	delete(r.timerFails, path)
	return true
}
