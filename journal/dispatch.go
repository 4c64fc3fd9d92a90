package journal

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// Attempt is one execution of the prepared operation, as Dispatch hands it out.
type Attempt struct {
	N            int    // 1 for the first attempt
	Operation    []byte // the prepared operation's body
	CheckpointID string // the checkpoint it continues from
	Fence        Fence  // the fence after the attempt was recorded
}

// Dispatch records a new attempt and hands out the prepared operation's body to execute,
// if f still holds the invocation, an operation is prepared, and the latest attempt (if
// any) ended Failed. It refuses (nothing written) when the latest attempt has no receipt
// yet or Succeeded (ErrState), and, once any attempt ended Unknown, for good
// (ErrNoReplay): the only way forward is Reconcile with the outside system's receipt.
//
// The attempt is recorded before the body is handed out: a body is never handed out for an
// attempt the majority does not have. Unanswered, the error matches
// execstore.ErrOutcomeUnknown, the body is not handed out, and the journal is uncertain
// about the invocation: Reverify shows whether the attempt was recorded (Latest "pending"),
// and its owner, who knows the body was never run, reconciles it Failed.
//
// Cost: one guarded findAndModify (a majority read too when it matches nothing).
func (j *Journal) Dispatch(ctx context.Context, f Fence) (Attempt, error) {
	if err := validateFence(f); err != nil {
		return Attempt{}, err
	}
	if err := j.uncertain.refusal(); err != nil {
		return Attempt{}, err
	}
	return submit(ctx, j, func(ctx context.Context) (Attempt, error) {
		guard := append(fenceFilter(f),
			bson.E{Key: fOp, Value: bson.D{{Key: "$exists", Value: true}}},
			bson.E{Key: fNoReplay, Value: false},
			bson.E{Key: fLatest, Value: bson.D{{Key: "$in", Value: bson.A{attemptNone, string(Failed)}}}})
		upd := bson.D{{Key: "$set", Value: bson.D{{Key: fRev, Value: f.Revision + 1}, {Key: fLatest, Value: attemptPending}}},
			{Key: "$inc", Value: bson.D{{Key: fAttempts, Value: 1}}}}
		var d document
		err := j.write(ctx, "dispatch", f.InvocationID, func(ctx context.Context) error {
			res := j.coll.FindOneAndUpdate(ctx, guard, upd, options.FindOneAndUpdate().SetReturnDocument(options.After))
			return res.Decode(&d)
		})
		if errors.Is(err, mongo.ErrNoDocuments) {
			return Attempt{}, j.explain(ctx, "dispatch", f, dispatchRule(f.InvocationID))
		}
		if err != nil {
			return Attempt{}, err
		}
		// Fail closed on what came back: every receipt must authenticate, and none may say
		// Unknown, before the body leaves the journal.
		inv, err := d.open(j.cipher)
		if err != nil {
			return Attempt{}, err
		}
		for _, r := range inv.Receipts {
			if r.Outcome == Unknown {
				return Attempt{}, &StateError{InvocationID: f.InvocationID, Op: "dispatch", noReplay: true,
					Reason: fmt.Sprintf("attempt %d ended unknown; reconcile it with the outside system's receipt", r.Attempt)}
			}
		}
		body, err := d.operation(j.cipher)
		if err != nil {
			return Attempt{}, err
		}
		return Attempt{N: d.Attempts, Operation: body, CheckpointID: d.Op.From, Fence: inv.Fence()}, nil
	})
}

// dispatchRule says why Dispatch matched nothing although the fence held.
func dispatchRule(id string) func(d *document) error {
	return func(d *document) error {
		refuse := func(noReplay bool, format string, args ...any) error {
			return &StateError{InvocationID: id, Op: "dispatch", noReplay: noReplay, Reason: fmt.Sprintf(format, args...)}
		}
		switch {
		case d.NoReplay:
			return refuse(true, "an attempt ended unknown; the only way forward is Reconcile with the outside system's receipt")
		case d.Op == nil:
			return refuse(false, "nothing is prepared")
		case d.Latest == attemptPending:
			return refuse(false, "attempt %d has no receipt yet: reconcile it first", d.Attempts)
		case d.Latest == string(Succeeded):
			return refuse(false, "attempt %d succeeded", d.Attempts)
		}
		return nil
	}
}
