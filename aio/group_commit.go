package aio

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/batch"
	"github.com/execstore/execstore/ops"
)

// commitItem is one commit waiting in, or flushed by, the group commit.
type commitItem struct {
	ctx  context.Context
	exe  *execstore.Execution
	c    *execstore.Commit
	seqs ops.Seqs
	plan ops.CommitPlan
	fut  *Future[[]int64]
}

func commitItemSize(it *commitItem) int {
	n := len(it.exe.Data) + 256
	for _, e := range it.c.Emits {
		n += len(e.Event) + len(e.TargetID)
	}
	return n
}

func newGroupCommit(s *Store, opts Options) *batch.Coalescer[*commitItem] {
	return batch.NewCoalescer(batch.CoalescerConfig{
		MaxItems:    s.maxBatch,
		MaxInFlight: opts.GroupCommitInFlight,
	}, commitItemSize, s.flushCommits)
}

// groupCommit hands a commit of an existing execution to the group commit. The future is
// settled by flushCommits.
func (s *Store) groupCommit(ctx context.Context, exe *execstore.Execution, c *execstore.Commit, seqs ops.Seqs, fut *Future[[]int64]) error {
	plan, err := ops.BuildCommit(s.env, exe, c, seqs)
	if err != nil {
		return err
	}
	plan.SetToken(commitToken())
	it := &commitItem{ctx: ctx, exe: exe, c: c, seqs: seqs, plan: plan, fut: fut}
	if err := s.group.Submit(ctx, it); err != nil {
		return err
	}
	return errSettledLater
}

// commitToken returns a random non-zero token.
func commitToken() int64 {
	for {
		if t := rand.Int64(); t != 0 {
			return t
		}
	}
}

// flushCommits writes one batch of commits as one bulk write and settles each future.
func (s *Store) flushCommits(items []*commitItem) {
	live := items[:0:0]
	for _, it := range items {
		if err := it.ctx.Err(); err != nil {
			s.settleCommit(it, err) // not sent
			continue
		}
		live = append(live, it)
	}
	if len(live) == 0 {
		return
	}
	ctxs := make([]context.Context, len(live))
	for i, it := range live {
		ctxs[i] = it.ctx
	}
	ctx, release := allDone(ctxs)
	defer release()
	plans := make([]*ops.CommitPlan, len(live))
	for i, it := range live {
		plans[i] = &it.plan
	}
	s.stats.batches.Add(1)
	s.stats.batched.Add(int64(len(live)))
	errs := ops.RunCommitBatch(ctx, s.env, plans)
	for i, it := range live {
		err := errs[i]
		var moved *ops.TraceMovedError
		if errors.As(err, &moved) {
			// Nothing was written; finish it alone with the fresh trace index.
			next := *it.exe
			next.TraceNext = moved.TraceNext
			if _, err = s.commit(it.ctx, &next, it.c, it.seqs); err == nil {
				it.exe.Version, it.exe.TraceNext = next.Version, next.TraceNext
				s.settleCommitWon(it, next.TraceNext)
				continue
			}
		}
		if err != nil {
			s.settleCommit(it, callerCause(it.ctx, err))
			continue
		}
		s.settleCommitWon(it, it.plan.TraceNext)
	}
}

// callerCause reports a batch that ended because every caller's context ended in terms of
// this caller's context: its error, as it would be for a commit of its own.
func callerCause(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	var unknown *execstore.OutcomeUnknownError
	if errors.As(err, &unknown) {
		return &execstore.OutcomeUnknownError{Op: unknown.Op, ExecutionID: unknown.ExecutionID, Err: cerr}
	}
	return cerr
}

func (s *Store) settleCommit(it *commitItem, err error) {
	s.stats.record(opCommit, err)
	it.fut.set(nil, err)
}

func (s *Store) settleCommitWon(it *commitItem, traceNext int64) {
	it.exe.Version = it.plan.Expected + 1
	it.exe.TraceNext = traceNext
	s.stats.record(opCommit, nil)
	it.fut.set(it.plan.OutboxSeqs, nil)
}

// allDone returns a context that ends once every one of ctxs has ended, so that a batch is
// abandoned only when no caller is waiting for it any more.
func allDone(ctxs []context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(ctxs)))
	stops := make([]func() bool, len(ctxs))
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}
