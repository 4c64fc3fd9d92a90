package journal

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Checkpoint stores state as the invocation's checkpoint for phase, replacing the previous
// one, if f still holds the invocation. The state is sealed by the journal's cipher. It is
// bound to the invocation, its claim, the phase and the checkpoint's new random id.
// Checkpoint returns that id with the next fence, and Prepare names it.
//
// Cost: one guarded update. When the update matches nothing, a majority read follows, and an
// *OwnerConflictError says what it found; nothing was written. That read failing is an
// unknown outcome, as below. When the update is unanswered, the error matches
// execstore.ErrOutcomeUnknown, and the journal is uncertain about the invocation.
func (j *Journal) Checkpoint(ctx context.Context, f Fence, phase Phase, state []byte) (Fence, string, error) {
	if err := validateFence(f); err != nil {
		return Fence{}, "", err
	}
	if !phase.valid() {
		return Fence{}, "", invalidPhase(phase)
	}
	if err := validatePayload("state", state); err != nil {
		return Fence{}, "", err
	}
	if err := j.uncertain.refusal(); err != nil {
		return Fence{}, "", err
	}
	id := newRandomID()
	ct, err := j.cipher.Seal(state, checkpointBinding(f.identity(), f.claim, phase, id))
	if err != nil {
		return Fence{}, "", sealFailure(err)
	}
	set := bson.D{{Key: fRev, Value: f.Revision + 1},
		{Key: fCkpt, Value: storedCheckpoint{ID: id, Phase: string(phase), CT: ct}}}
	nf, err := j.update(ctx, "checkpoint", f, nil, bson.D{{Key: "$set", Value: set}}, noStateRule)
	return nf, id, err
}

// update applies upd to f's invocation on the journal's pool; see guardedUpdate.
func (j *Journal) update(ctx context.Context, op string, f Fence, extra, upd bson.D, state func(*document) error) (Fence, error) {
	return submit(ctx, j, op, f.InvocationID, func(ctx context.Context) (Fence, error) {
		return j.guardedUpdate(ctx, op, f, extra, upd, state)
	})
}

// guardedUpdate applies upd to f's invocation, guarded by f and by extra conditions, and
// returns the next fence; when it matches nothing, state explains why (see explain).
func (j *Journal) guardedUpdate(ctx context.Context, op string, f Fence, extra, upd bson.D, state func(*document) error) (Fence, error) {
	var matched int64
	err := j.write(ctx, op, f.InvocationID, func(ctx context.Context) error {
		res, err := j.coll.UpdateOne(ctx, append(fenceFilter(f), extra...), upd)
		if err == nil {
			matched = res.MatchedCount
		}
		return err
	})
	if err != nil {
		return Fence{}, err
	}
	if matched == 0 {
		return Fence{}, j.explain(ctx, op, f, state)
	}
	return next(f), nil
}

// noStateRule is the state rule of a write guarded by the fence alone.
func noStateRule(*document) error { return nil }
