package memstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

// An execution's trace is a ring of its last Store.traceMax steps. Each step is stamped with
// the execution's TraceNext, which then grows by one, so indices strictly increase whether
// the step came with a commit or from AppendTrace, and with the time it was recorded: its
// commit's, or AppendTrace's reading of the clock.

// traceEntry is one kept trace step.
type traceEntry struct {
	index int64
	step  []byte    // encoded BSON
	at    time.Time // when it was recorded (ops.CommitTime)
}

// appendStep stamps step with r's next index and the time at, appends it and drops the steps
// past the ring's size. The caller holds the lock.
func (s *Store) appendStep(r *record, step []byte, at time.Time) {
	r.trace = append(r.trace, traceEntry{index: r.exe.TraceNext, step: step, at: at})
	r.exe.TraceNext++
	if over := len(r.trace) - s.traceMax; over > 0 {
		r.trace = slices.Delete(r.trace, 0, over)
	}
}

// AppendTrace records step outside a commit, with the execution's next trace index. The
// execution must exist (execstore.ErrNotFound otherwise). Its version is left alone.
func (s *Store) AppendTrace(ctx context.Context, id string, step map[string]any) error {
	if err := contract.ValidateID("id", id); err != nil {
		return err
	}
	if step == nil {
		return contract.Invalid("step", "must not be nil")
	}
	b, err := contract.EncodeMap(step)
	if err != nil {
		return contract.Invalid("step", "cannot be encoded as BSON: %v", err)
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.execs[id]
	if r == nil {
		return fmt.Errorf("%w: %q", execstore.ErrNotFound, id)
	}
	s.appendStep(r, b, ops.CommitTime())
	return nil
}

// ReadTrace returns the kept trace steps, oldest first, each decoded afresh. It returns none
// for an unknown execution.
func (s *Store) ReadTrace(ctx context.Context, id string) ([]execstore.TraceStep, error) {
	r, err := s.readRecord(ctx, id)
	if err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	if r == nil {
		return nil, nil
	}
	out := make([]execstore.TraceStep, len(r.trace))
	for i, t := range r.trace {
		m, err := contract.DecodeMap(t.step)
		if err != nil {
			return nil, err // never: the store encoded it
		}
		out[i] = execstore.TraceStep{Index: t.index, Fields: m, At: t.at}
	}
	return out, nil
}
