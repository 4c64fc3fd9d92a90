package memstore

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// Load returns a copy of the execution, or (nil, nil) when there is none.
func (s *Store) Load(ctx context.Context, id string) (*execstore.Execution, error) {
	r, err := s.readRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if r == nil {
		return nil, nil
	}
	return r.execution(), nil
}

// LoadForEvent returns a copy of the execution and whether eventID is in its dedupe set, both
// read at the same version. An unknown id gives (nil, false, nil).
func (s *Store) LoadForEvent(ctx context.Context, id, eventID string) (*execstore.Execution, bool, error) {
	if err := contract.ValidateID("id", id); err != nil {
		return nil, false, err
	}
	if err := contract.ValidateID("eventID", eventID); err != nil {
		return nil, false, err
	}
	if err := s.rlock(ctx); err != nil {
		return nil, false, err
	}
	defer s.mu.RUnlock()
	r := s.execs[id]
	if r == nil {
		return nil, false, nil
	}
	return r.execution(), r.dedupe.holds(eventID), nil
}

// IsProcessed reports whether eventID is in the execution's dedupe set. An unknown execution
// has processed nothing.
func (s *Store) IsProcessed(ctx context.Context, id, eventID string) (bool, error) {
	if err := contract.ValidateID("id", id); err != nil {
		return false, err
	}
	if err := contract.ValidateID("eventID", eventID); err != nil {
		return false, err
	}
	if err := s.rlock(ctx); err != nil {
		return false, err
	}
	defer s.mu.RUnlock()
	r := s.execs[id]
	return r != nil && r.dedupe.holds(eventID), nil
}

// execution returns a copy of r's execution that shares nothing with the store.
func (r *record) execution() *execstore.Execution {
	exe := r.exe
	exe.Data = cloneBytes(r.exe.Data)
	return &exe
}
