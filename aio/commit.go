package aio

import (
	"context"
	"errors"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/async"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
)

// traceRetryLimit bounds how long a commit keeps being rebuilt after losing only its
// trace-index guard to concurrent AppendTrace calls (nothing was written each time); the
// caller's context bounds it too.
const traceRetryLimit = 10 * time.Second

// Commit atomically writes exe at exe.Version+1 with everything in c (see execstore.Store).
func (s *Store) Commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) ([]int64, error) {
	return s.CommitAsync(ctx, exe, c).Wait(ctx)
}

// Save commits exe's snapshot alone.
func (s *Store) Save(ctx context.Context, exe *execstore.Execution) error {
	_, err := s.Commit(ctx, exe, execstore.Commit{})
	return err
}

// CommitAsync submits the commit and returns at once. Do not read or change exe, or the
// slices and maps c holds, until the future is done. The store reads them when it builds and
// sends the commit, and on success it sets exe.Version and exe.TraceNext. A caller whose Wait
// returned ErrOutcomeUnknown may use exe again at once: the store no longer touches it.
func (s *Store) CommitAsync(ctx context.Context, exe *execstore.Execution, c execstore.Commit) *Future[[]int64] {
	if err := contract.ValidateCommit(exe, &c); err != nil {
		return future(async.Failed[[]int64](err))
	}
	pc, err := ops.PrepareCommit(s.env.Layout, exe, &c) // refuses, before any I/O, what cannot fit
	if err != nil {
		return future(async.Failed[[]int64](err))
	}
	epoch := s.cacheMark()
	var r *async.Request[[]int64]
	r = newRequest(s, opCommit, func(wctx context.Context) ([]int64, error) {
		seqs, err := s.takeSeqs(wctx, &c)
		if err != nil {
			return nil, err
		}
		k := s.takeCarried(ctx, exe, &c, &seqs)
		note := noteOf(&c)
		s.begin(&note, exe, &c, seqs)
		if s.group != nil && exe.Version > 0 {
			// The worker's context ends when it returns; the batch answers to the caller's.
			return nil, s.groupCommit(ctx, exe, pc, seqs, k, epoch, note, r.Future())
		}
		e := &ending{id: exe.ID, expected: exe.Version, event: c.ProcessedEventID, epoch: epoch, carry: &k, note: note}
		next := *exe
		out, err := s.commit(wctx, &next, pc, seqs, &k)
		s.settle(e, alone{}, exe, next.Version, next.TraceNext, out, err)
		return out, err
	})
	ctx = traced(ctx, s, r, opCommit, exe.ID)
	return future(r.Submit(ctx, s.pool, s.shed))
}

// takeSeqs takes the outbox and spawn seqs c needs from the prefetched blocks, and the time
// the commit records (its entries', intents' and trace step's, and the document's
// updated_at).
func (s *Store) takeSeqs(ctx context.Context, c *execstore.Commit) (ops.Seqs, error) {
	seqs := ops.Seqs{At: ops.CommitTime()}
	var err error
	if len(c.Emits) > 0 {
		if seqs.Outbox, err = s.outboxSeq.Take(ctx, len(c.Emits), make([]int64, 0, len(c.Emits))); err != nil {
			return seqs, err
		}
	}
	if len(c.Spawns) > 0 {
		if seqs.Spawns, err = s.spawnSeq.Take(ctx, len(c.Spawns), make([]int64, 0, len(c.Spawns))); err != nil {
			return seqs, err
		}
	}
	return seqs, nil
}

// commit runs one commit alone: one insert or one guarded update. It carries what *k holds
// (seqs.Acked, seqs.Fired); if it matches nothing only for one of those being gone, it
// leaves them to be removed apart, empties *k, and is sent again without them.
func (s *Store) commit(ctx context.Context, exe *execstore.Execution, pc *ops.PreparedCommit, seqs ops.Seqs, k *carried) ([]int64, error) {
	next := *exe
	var pause *backoff.ExponentialBackOff
	for {
		plan, err := pc.Build(s.env.Layout, &next, seqs)
		if err != nil {
			return nil, err
		}
		if seqs.Fired != nil {
			plan.SetToken(k.token) // the guard of the fired timer's restore
		}
		err = opsrun.Commit(ctx, s.env, plan)
		if gone := (*opsrun.CarriedGoneError)(nil); errors.As(err, &gone) {
			seqs = k.gone(s, seqs)
			continue
		}
		var moved *opsrun.TraceMovedError
		if !errors.As(err, &moved) {
			if err != nil {
				return nil, err
			}
			exe.Version++
			exe.TraceNext = plan.TraceNext
			return plan.OutboxSeqs, nil
		}
		// Appends took the index; nothing was written. Retry with the fresh one, pausing
		// more and more so a burst of appends cannot starve the commit.
		next.TraceNext = moved.TraceNext
		if pause == nil {
			pause = backoff.NewExponentialBackOff()
			pause.InitialInterval, pause.MaxInterval, pause.MaxElapsedTime = time.Millisecond, 50*time.Millisecond, traceRetryLimit
			continue
		}
		d := pause.NextBackOff()
		if d == backoff.Stop {
			return nil, errors.New("execstore: commit kept losing its trace index to concurrent trace appends; nothing was written")
		}
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
