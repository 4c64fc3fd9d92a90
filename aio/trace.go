package aio

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
)

// AppendTrace records a trace step outside a commit (see execstore.Store). It costs two round
// trips.
func (s *Store) AppendTrace(ctx context.Context, id string, step map[string]any) error {
	if err := contract.ValidateID("id", id); err != nil {
		return err
	}
	if step == nil {
		return contract.Invalid("step", "must not be nil")
	}
	if _, err := contract.EncodedSize("step", step); err != nil {
		return err
	}
	_, err := submit(ctx, s, opAppendTrace, id, func(ctx context.Context) (struct{}, error) {
		defer s.forget(id) // the trace index moved: a cached one would cost a retry
		return struct{}{}, opsrun.AppendTrace(ctx, s.env, id, step)
	}).Wait(ctx)
	return err
}

// ReadTrace returns the kept trace steps, oldest first.
func (s *Store) ReadTrace(ctx context.Context, id string) ([]execstore.TraceStep, error) {
	if err := contract.ValidateID("id", id); err != nil {
		return nil, err
	}
	return submit(ctx, s, opReadTrace, id, func(ctx context.Context) ([]execstore.TraceStep, error) {
		return opsrun.ReadTrace(ctx, s.env, id)
	}).Wait(ctx)
}

var _ execstore.Store = (*Store)(nil)
