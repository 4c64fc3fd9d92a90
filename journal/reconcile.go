package journal

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
)

// Reconcile records r, the outside system's receipt for attempt r.Attempt (the latest). It
// does so if f still holds the invocation and that attempt awaits a receipt. An attempt
// awaits one when it was handed out and has no receipt yet, or when it ended Unknown and r
// (Succeeded or Failed) settles it. The receipt's data is sealed, bound to the invocation,
// its claim, the attempt and the outcome. Receipts are kept apart from the operation and
// never replace one another. An Unknown receipt forbids handing the operation out ever again
// (ErrNoReplay for Dispatch). A later Succeeded or Failed receipt settles the attempt but
// does not lift that.
//
// The same write records when, by the server's clock ($currentDate). A receipt that
// finishes the invocation (Succeeded, or Failed after an attempt ended Unknown: see
// Invocation.Finished) thus records when it finished, which the retention counts from (see
// DeleteExpired).
//
// Cost and unknown outcomes as Checkpoint.
func (j *Journal) Reconcile(ctx context.Context, f Fence, r Receipt) (Fence, error) {
	if err := validateFence(f); err != nil {
		return Fence{}, err
	}
	if !r.Outcome.valid() {
		return Fence{}, invalidOutcome(r.Outcome)
	}
	if r.Attempt < 1 {
		return Fence{}, contract.Invalid("Receipt.Attempt", "must be at least 1, got %d", r.Attempt)
	}
	if err := validatePayload("Receipt.Data", r.Data); err != nil {
		return Fence{}, err
	}
	if err := j.uncertain.refusal(); err != nil {
		return Fence{}, err
	}
	ct, err := j.cipher.Seal(r.Data, receiptBinding(f.identity(), f.claim, r.Attempt, r.Outcome))
	if err != nil {
		return Fence{}, sealFailure(err)
	}
	open := bson.A{attemptPending}
	if r.Outcome != Unknown {
		open = append(open, string(Unknown))
	}
	guard := bson.D{{Key: fAttempts, Value: r.Attempt}, {Key: fLatest, Value: bson.D{{Key: "$in", Value: open}}}}
	set := bson.D{{Key: fRev, Value: f.Revision + 1}, {Key: fLatest, Value: string(r.Outcome)}}
	if r.Outcome == Unknown {
		set = append(set, bson.E{Key: fNoReplay, Value: true})
	}
	upd := bson.D{{Key: "$set", Value: set},
		{Key: "$push", Value: bson.D{{Key: fReceipts, Value: storedReceiptItem{Attempt: r.Attempt, Outcome: string(r.Outcome), CT: ct}}}},
		{Key: "$currentDate", Value: bson.D{{Key: fReceiptAt, Value: true}}}}
	return j.update(ctx, "reconcile", f, guard, upd, func(d *document) error {
		refuse := func(format string, args ...any) error {
			return &StateError{InvocationID: f.InvocationID, Op: "reconcile", Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case d.Attempts != r.Attempt:
			return refuse("attempt %d is not the latest (%d)", r.Attempt, d.Attempts)
		case d.Latest == string(Unknown) && r.Outcome == Unknown:
			return refuse("attempt %d already ended unknown; only the outside system's receipt settles it", r.Attempt)
		case d.Latest != attemptPending && d.Latest != string(Unknown):
			return refuse("attempt %d already ended %s", r.Attempt, d.Latest)
		}
		return nil
	})
}
