package journal

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

// Prepare stores operation as what the invocation will run, continuing from checkpoint (an
// id Checkpoint returned). The operation is opaque to the journal and sealed by its cipher.
// Prepare writes only if f still holds the invocation, the stored checkpoint is exactly that
// one, and no attempt has been handed out yet. Until then Prepare may replace the operation.
// The checkpoint id is in the write's filter. When the stored checkpoint is another, nothing
// is written and the error is a *CheckpointMismatchError.
//
// Cost and unknown outcomes as Checkpoint.
func (j *Journal) Prepare(ctx context.Context, f Fence, checkpoint string, operation []byte) (Fence, error) {
	if err := validateFence(f); err != nil {
		return Fence{}, err
	}
	if err := contract.ValidateID("checkpoint", checkpoint); err != nil {
		return Fence{}, err
	}
	if err := validatePayload("operation", operation); err != nil {
		return Fence{}, err
	}
	if err := j.uncertain.refusal(); err != nil {
		return Fence{}, err
	}
	ct, err := j.cipher.Seal(operation, operationBinding(f.identity(), f.claim, checkpoint))
	if err != nil {
		return Fence{}, sealFailure(err)
	}
	guard := bson.D{{Key: fCkptID, Value: checkpoint}, {Key: fAttempts, Value: 0}}
	set := bson.D{{Key: fRev, Value: f.Revision + 1}, {Key: fOp, Value: storedOperation{From: checkpoint, CT: ct}}}
	return j.update(ctx, "prepare", f, guard, bson.D{{Key: "$set", Value: set}}, func(d *document) error {
		found := ""
		if d.Ckpt != nil {
			found = d.Ckpt.ID
		}
		if found != checkpoint {
			return &CheckpointMismatchError{InvocationID: f.InvocationID, Expected: checkpoint, Found: found}
		}
		if d.Attempts > 0 {
			return &StateError{InvocationID: f.InvocationID, Op: "prepare",
				Reason: fmt.Sprintf("%d attempts were handed out: the prepared operation can no longer change", d.Attempts)}
		}
		return nil
	})
}
