package aio

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
)

var _ execstore.DeadCounting = (*Store)(nil)

// Fail records one failed delivery of the pending item ref, and with f.Dead, or once the
// attempts reach a positive f.MaxAttempts, moves it to dead. The update is guarded by the
// attempts read, so the count it writes is the stored one plus one: concurrent calls never
// record more than f.MaxAttempts, and the one that reaches it moves the item (see
// opsrun.Fail). Cost: one find of the item at the primary and one guarded single-document
// update (again, up to 4 rounds, when another process's failure record came in between;
// then an error matching execstore.ErrRolledBack, nothing written). A write whose answer
// was lost is an *execstore.OutcomeUnknownError.
func (s *Store) Fail(ctx context.Context, ref execstore.ItemRef, f execstore.Failure) (execstore.Attempts, bool, error) {
	if err := contract.ValidateItemRef(ref); err != nil {
		return execstore.Attempts{}, false, err
	}
	if err := contract.ValidateFailure(f); err != nil {
		return execstore.Attempts{}, false, err
	}
	ref = contract.NormalRef(ref)
	type result struct {
		a  execstore.Attempts
		ok bool
	}
	r, err := submit(ctx, s, opFail, ref.ExecutionID, func(ctx context.Context) (result, error) {
		a, ok, err := opsrun.Fail(ctx, s.env, ref, f)
		return result{a, ok}, err
	}).Wait(ctx)
	return r.a, r.ok, err
}

// ListDead returns one page of dead items matching q. Cost: one find of the documents that
// hold dead items, by _id, reading until the page is full.
func (s *Store) ListDead(ctx context.Context, q execstore.DeadQuery) (execstore.DeadPage, error) {
	if err := contract.ValidateDeadQuery(&q); err != nil {
		return execstore.DeadPage{}, err
	}
	return submit(ctx, s, opListDead, q.ExecutionID, func(ctx context.Context) (execstore.DeadPage, error) {
		return opsrun.ListDead(ctx, s.env, q)
	}).Wait(ctx)
}

// CountDead returns the number of dead items of each kind. Cost: one find of every document
// that holds dead items.
func (s *Store) CountDead(ctx context.Context) (map[execstore.ItemKind]int64, error) {
	return submit(ctx, s, opListDead, "", func(ctx context.Context) (map[execstore.ItemKind]int64, error) {
		return opsrun.CountDead(ctx, s.env)
	}).Wait(ctx)
}

// CountDeadIn returns the number of dead items in each of partitions that holds any (see
// execstore.DeadCounting). Cost: one aggregation, which reads the documents of the partitions
// that hold dead items, on their partial index, and answers a row per partition.
func (s *Store) CountDeadIn(ctx context.Context, partitions []int) (map[int]int64, error) {
	parts, err := contract.ValidatePartitions("partitions", partitions, s.env.Partitions)
	if err != nil {
		return nil, err
	}
	if len(parts) == 0 {
		return map[int]int64{}, nil
	}
	return submit(ctx, s, opListDead, "", func(ctx context.Context) (map[int]int64, error) {
		return opsrun.CountDeadIn(ctx, s.env, parts)
	}).Wait(ctx)
}

// Revive puts the dead item ref back to pending, and moves the execution's version on by one
// in the same write (ops.ReviveCommand). The snapshot cache forgets the execution, before
// the write and after it: LoadForEvent then reads the new version, and a commit at the old
// one fails its version guard on the server with a *execstore.ConflictError, as after any
// other writer's commit. Cost: one find and one guarded single-document update.
func (s *Store) Revive(ctx context.Context, ref execstore.ItemRef) (bool, error) {
	if err := contract.ValidateItemRef(ref); err != nil {
		return false, err
	}
	ref = contract.NormalRef(ref)
	return submit(ctx, s, opRevive, ref.ExecutionID, func(ctx context.Context) (bool, error) {
		s.forget(ref.ExecutionID) // the revival moves the version on
		ok, err := opsrun.Revive(ctx, s.env, ref)
		s.forget(ref.ExecutionID)
		return ok, err
	}).Wait(ctx)
}

// Discard drops the dead item ref for good (see execstore.DeadLetters). Cost: one guarded
// single-document update (ops.DiscardCommand). A write whose answer was lost is an
// *execstore.OutcomeUnknownError: calling Discard again settles it.
func (s *Store) Discard(ctx context.Context, ref execstore.ItemRef) (bool, error) {
	if err := contract.ValidateItemRef(ref); err != nil {
		return false, err
	}
	ref = contract.NormalRef(ref)
	return submit(ctx, s, opDiscard, ref.ExecutionID, func(ctx context.Context) (bool, error) {
		return opsrun.Discard(ctx, s.env, ref)
	}).Wait(ctx)
}
