package aio

import (
	"context"
	"errors"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/ops"
)

// traceRetries bounds how often a commit is rebuilt after losing only its trace-index guard
// to a concurrent AppendTrace (nothing was written each time).
const traceRetries = 8

// Commit atomically writes exe at exe.Version+1 with everything in c; see execstore.Store.
func (s *Store) Commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) ([]int64, error) {
	return s.CommitAsync(ctx, exe, c).Wait(ctx)
}

// Save commits exe's snapshot alone.
func (s *Store) Save(ctx context.Context, exe *execstore.Execution) error {
	_, err := s.Commit(ctx, exe, execstore.Commit{})
	return err
}

// CommitAsync submits the commit and returns at once. exe must not be read or changed until
// the future is done: on success the store sets exe.Version and exe.TraceNext.
func (s *Store) CommitAsync(ctx context.Context, exe *execstore.Execution, c execstore.Commit) *Future[[]int64] {
	if err := execstore.ValidateCommit(exe, &c); err != nil {
		return failedFuture[[]int64](err)
	}
	return submit(ctx, s, opCommit, func(ctx context.Context) ([]int64, error) {
		return s.commit(ctx, exe, &c)
	})
}

func (s *Store) commit(ctx context.Context, exe *execstore.Execution, c *execstore.Commit) ([]int64, error) {
	var seqs ops.Seqs
	var err error
	if len(c.Emits) > 0 {
		if seqs.Outbox, err = s.outboxSeq.Take(ctx, len(c.Emits), make([]int64, 0, len(c.Emits))); err != nil {
			return nil, err
		}
	}
	if len(c.Spawns) > 0 {
		if seqs.Spawns, err = s.spawnSeq.Take(ctx, len(c.Spawns), make([]int64, 0, len(c.Spawns))); err != nil {
			return nil, err
		}
	}
	next := *exe
	for range traceRetries {
		plan, err := ops.BuildCommit(s.env, &next, c, seqs)
		if err != nil {
			return nil, err
		}
		err = ops.RunCommit(ctx, s.env, plan)
		var moved *ops.TraceMovedError
		if errors.As(err, &moved) {
			next.TraceNext = moved.TraceNext
			continue
		}
		if err != nil {
			return nil, err
		}
		exe.Version++
		exe.TraceNext = plan.TraceNext
		return plan.OutboxSeqs, nil
	}
	return nil, errors.New("execstore: commit lost its trace index to concurrent trace appends too often")
}
