package journal

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// Attempt is one execution of the prepared operation, as Dispatch hands it out.
type Attempt struct {
	N            int    // 1 for the first attempt
	Operation    []byte // the prepared operation's body
	CheckpointID string // the checkpoint it continues from
	Fence        Fence  // the fence after the attempt was recorded
}

// Dispatch records a new attempt and hands out the prepared operation's body to execute. It
// does so if f still holds the invocation, an operation is prepared, and the latest attempt
// (if any) ended Failed. It refuses, writing nothing, when the latest attempt has no receipt
// yet or Succeeded (ErrState). Once any attempt ended Unknown, it refuses for good
// (ErrNoReplay): the only way forward is Reconcile with the outside system's receipt.
//
// It decides from a majority read before it writes. Every ciphertext, the operation's
// included, is authenticated, and the attempt flags are checked against the authenticated
// receipts. So a refusal records no attempt: an *OwnerConflictError, a *StateError or an
// *IntegrityError. A no-replay flag cleared in the stored document is an *IntegrityError
// that matches ErrNoReplay too. A read that fails is the read's error, and nothing was
// written.
//
// The attempt is recorded before the body is handed out: a body is never handed out for an
// attempt the majority does not have. The write is guarded by the fence, the flags and the
// operation's exact ciphertext it read. When the write is unanswered, the error matches
// execstore.ErrOutcomeUnknown, the body is not handed out, and the journal is uncertain
// about the invocation. Reverify then shows whether the attempt was recorded (Latest
// "pending"). Its owner, who knows the body was never run, reconciles it Failed.
//
// Cost: one majority read and one guarded update (a second majority read when the update
// matches nothing).
func (j *Journal) Dispatch(ctx context.Context, f Fence) (Attempt, error) {
	if err := validateFence(f); err != nil {
		return Attempt{}, err
	}
	if err := j.uncertain.refusal(); err != nil {
		return Attempt{}, err
	}
	rule := dispatchRule(f.InvocationID)
	return submit(ctx, j, "dispatch", f.InvocationID, func(ctx context.Context) (Attempt, error) {
		d, err := j.load(ctx, "dispatch", f.InvocationID)
		if err != nil {
			return Attempt{}, err
		}
		if d == nil {
			return Attempt{}, &notFoundError{op: "dispatch", id: f.InvocationID}
		}
		if err := holds(f, d); err != nil {
			return Attempt{}, err
		}
		// Fail closed on what is stored: every ciphertext and flag must authenticate, and
		// no receipt may say Unknown, before anything is written or handed out.
		inv, body, err := d.openAll(j.cipher)
		if err != nil {
			return Attempt{}, err
		}
		if err := rule(d); err != nil {
			return Attempt{}, err
		}
		for _, r := range inv.Receipts {
			if r.Outcome == Unknown {
				return Attempt{}, &StateError{InvocationID: f.InvocationID, Op: "dispatch", noReplay: true,
					Reason: fmt.Sprintf("attempt %d ended unknown; reconcile it with the outside system's receipt", r.Attempt)}
			}
		}
		guard := bson.D{{Key: fOpCT, Value: d.Op.CT}, {Key: fNoReplay, Value: false},
			{Key: fAttempts, Value: d.Attempts}, {Key: fLatest, Value: d.Latest}}
		upd := bson.D{{Key: "$set", Value: bson.D{{Key: fRev, Value: f.Revision + 1},
			{Key: fAttempts, Value: d.Attempts + 1}, {Key: fLatest, Value: attemptPending}}},
			{Key: "$unset", Value: bson.D{{Key: fReceiptAt, Value: ""}}}}
		nf, err := j.guardedUpdate(ctx, "dispatch", f, guard, upd, rule)
		if err != nil {
			return Attempt{}, err
		}
		return Attempt{N: d.Attempts + 1, Operation: body, CheckpointID: d.Op.From, Fence: nf}, nil
	})
}

// dispatchRule is the state Dispatch needs, as a refusal: nil when an operation is
// prepared, no attempt ended Unknown, and the latest attempt (if any) ended Failed.
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
		case d.Latest != attemptNone && d.Latest != string(Failed):
			return refuse(false, "attempt %d ended %s", d.Attempts, d.Latest)
		}
		return nil
	}
}
