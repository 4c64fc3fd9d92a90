package aio

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/batch"
	"github.com/execstore/execstore/internal/async"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
)

// commitItem is one commit waiting in, or flushed by, the group commit.
type commitItem struct {
	ctx context.Context
	exe *execstore.Execution // the caller's: touched only while the caller still waits
	// snap is the store's copy of *exe as the commit was built, Data included: what a rebuild
	// reads, since a caller that gave up may change *exe at once.
	snap  execstore.Execution
	pc    *ops.PreparedCommit
	seqs  ops.Seqs
	carry carried // what the commit removes in passing (seqs.Acked, seqs.Fired)
	plan  ops.CommitPlan
	// epoch is the snapshot cache's when the commit was submitted.
	epoch uint64
	note  wakeNote // what the commit, once won, tells the relays
	s     *Store
	fut   *async.Future[[]int64]
	hand  *async.Handoff
}

func commitItemSize(it *commitItem) int { return it.plan.Bytes }

// batchWriter writes a group commit's batch of plans as one bulk write and settles the outcome
// of each, one error per plan (opsrun.CommitBatch). ctx ends when every caller in the batch
// has given up; settle bounds the reads that settle the outcomes after it.
type batchWriter func(ctx context.Context, settle opsrun.Settle, env opsrun.Env, plans []*ops.CommitPlan) []error

// newGroupCommit returns s's group commit, whose every batch is written by write.
func newGroupCommit(s *Store, write batchWriter) *batch.Coalescer[*commitItem] {
	return batch.NewCoalescer(s.opts.batches(s.opts.writesInFlight(s.info.Profile)),
		commitItemSize, func(items []*commitItem) { s.flushCommits(items, write) })
}

// groupCommit hands a commit of an existing execution to the group commit. The future is
// settled by flushCommits, or by the caller giving up (see handoff).
func (s *Store) groupCommit(ctx context.Context, exe *execstore.Execution, pc *ops.PreparedCommit, seqs ops.Seqs,
	k carried, epoch uint64, note wakeNote, fut *async.Future[[]int64]) error {
	// The plan must not share the caller's Data: a caller that gives up once the batch is sent
	// may change it at once, while the bulk write is still being encoded.
	snap := *exe
	snap.Data = bytes.Clone(exe.Data)
	plan, err := pc.Build(s.env.Layout, &snap, seqs)
	if err != nil {
		s.settle(&ending{id: exe.ID, expected: exe.Version, event: plan.EventID, epoch: epoch, carry: &k, note: note}, alone{}, exe, 0, 0, nil, err)
		return err
	}
	token := k.token
	if token == 0 {
		token = commitToken()
	}
	plan.SetToken(token)
	it := &commitItem{ctx: ctx, exe: exe, snap: snap, pc: pc, seqs: seqs, carry: k, plan: plan, epoch: epoch, note: note, fut: fut, s: s}
	// Whoever settles the future ends the commit on the relays' sinks first: the caller
	// giving up (or a refusal) here, the flush in settleCommit and settleCommitWon. The
	// acks it carries go out alone then: a write that still applies finds their entries
	// gone and is sent again without them, or leaves the acks' own writes nothing to do. A
	// fired timer it carries counts as maybe removed when the caller gave up after the send.
	it.hand = fut.HandTo(func(ctxErr error) error {
		return &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: exe.ID, Err: ctxErr}
	}, func(err error) {
		k.handedBack(s, err)
		s.stats.record(opCommit, err)
		note.end(false)
	})
	if err := s.group.Submit(ctx, it); err != nil {
		it.hand.Refuse(err)
	}
	return async.ErrSettledLater
}

// commitToken returns a random non-zero token.
func commitToken() int64 {
	for {
		if t := rand.Int64(); t != 0 {
			return t
		}
	}
}

// flushCommits writes one batch of commits as one bulk write, through write, and settles each
// future. A commit whose caller withdrew it is skipped; one whose caller abandoned it after it
// was sent is written, but neither its future nor the caller's execution is touched afterwards.
func (s *Store) flushCommits(items []*commitItem, write batchWriter) {
	var live []*commitItem
	var ctxs []context.Context
	for _, it := range items {
		if err := it.ctx.Err(); err != nil {
			it.hand.Refuse(err)
			continue
		}
		if s.stop.Err() != nil {
			it.hand.Refuse(execstore.ErrClosed)
			continue
		}
		if !it.hand.Send() {
			continue // withdrawn by its caller
		}
		live, ctxs = append(live, it), append(ctxs, it.ctx)
	}
	if len(live) == 0 {
		return
	}
	ctx, release := async.AllDone(s.stop, ctxs)
	defer release()
	ctx = withOperation(ctx, opCommit)
	plans := make([]*ops.CommitPlan, len(live))
	for i, it := range live {
		plans[i] = &it.plan
	}
	s.stats.groupCommits.Add(1)
	s.stats.groupedCommits.Add(int64(len(live)))
	s.tel.Batched(opNames[opCommit], len(live), ctxs...)
	// The read that settles the outcomes after the bulk write runs even when every caller has
	// given up, within Options.SettleTimeout from its start (Close giving up ends it sooner).
	errs := write(ctx, opsrun.Settle{Parent: s.stop, Timeout: s.opts.SettleTimeout}, s.env, plans)
	var moved []int
	for i, it := range live {
		var tm *opsrun.TraceMovedError
		var gone *opsrun.CarriedGoneError
		switch {
		case errors.As(errs[i], &tm), errors.As(errs[i], &gone):
			moved = append(moved, i) // after the others are settled
		case errs[i] != nil:
			s.settleCommit(it, async.CallerCause(it.ctx, errs[i]))
		default:
			s.settleCommitWon(it, it.plan.Expected+1, it.plan.TraceNext)
		}
	}
	for _, i := range moved {
		// Nothing was written: finish it alone with the fresh trace index, or without the
		// acks it carried.
		it := live[i]
		next := it.snap
		var tm *opsrun.TraceMovedError
		if errors.As(errs[i], &tm) {
			next.TraceNext = tm.TraceNext
		} else {
			it.seqs = it.carry.gone(s, it.seqs)
		}
		if _, err := s.commit(it.ctx, &next, it.pc, it.seqs, &it.carry); err != nil {
			s.settleCommit(it, err)
			continue
		}
		s.settleCommitWon(it, next.Version, next.TraceNext)
	}
}

// settleCommit settles it, failed with err (see ending).
func (s *Store) settleCommit(it *commitItem, err error) {
	s.settle(it.ending(), it, it.exe, 0, 0, nil, err)
}

// settleCommitWon settles it, won at version with traceNext (see ending).
func (s *Store) settleCommitWon(it *commitItem, version, traceNext int64) {
	s.settle(it.ending(), it, it.exe, version, traceNext, it.plan.OutboxSeqs, nil)
}

// ending is it's settling.
func (it *commitItem) ending() *ending {
	return &ending{id: it.plan.ID, expected: it.plan.Expected, event: it.plan.EventID, epoch: it.epoch, carry: &it.carry, note: it.note}
}

// waiting reports whether its caller still waits: false when it gave up, and was answered.
func (it *commitItem) waiting() bool { return it.hand.Settle() }

// answer records the outcome in the store's stats and sets the future.
func (it *commitItem) answer(seqs []int64, err error) {
	it.s.stats.record(opCommit, err)
	it.fut.Set(seqs, err)
}
