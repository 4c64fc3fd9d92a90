package journal

import (
	"errors"
	"fmt"
)

// The attempt flags (attempts, latest, no_replay) are stored in plaintext so that guarded
// writes can name them in their filters, but every receipt is authenticated with its attempt
// and outcome bound in, and the journal's writes keep the flags and the receipts in step:
//
//   - latest is "none", "pending" or an Outcome; "none" exactly when attempts is 0;
//   - receipts settle attempts 1 to attempts, in order;
//   - latest "pending": the latest attempt has no receipt; latest an outcome: the last
//     receipt is the latest attempt's, with that outcome;
//   - no_replay is set exactly when a receipt says Unknown;
//   - attempts above 0 need a prepared operation.
//
// Flags that break one of these were altered outside the journal. Every read that opens a
// document (Read, Reverify, Dispatch, the read after a missed guard) refuses them with an
// *IntegrityError (What "attempt flags"), before anything is written or handed out.

// checkFlags checks d's attempt flags against its authenticated receipts.
func (d *document) checkFlags(receipts []Receipt) error {
	refused := func(err error) error {
		return &IntegrityError{InvocationID: d.ID, What: "attempt flags", Err: err}
	}
	bad := func(format string, args ...any) error { return refused(fmt.Errorf(format, args...)) }
	switch d.Latest {
	case attemptNone, attemptPending, string(Succeeded), string(Failed), string(Unknown):
	default:
		return bad("latest %q is not an attempt state", d.Latest)
	}
	switch {
	case d.Attempts < 0:
		return bad("%d attempts", d.Attempts)
	case (d.Attempts == 0) != (d.Latest == attemptNone):
		return bad("%d attempts with latest %q", d.Attempts, d.Latest)
	case d.Attempts > 0 && d.Op == nil:
		return bad("%d attempts and nothing prepared", d.Attempts)
	}
	prev, unknown := 0, false
	for i, r := range receipts {
		if r.Attempt < prev || r.Attempt < 1 || r.Attempt > d.Attempts {
			return bad("receipt %d settles attempt %d of %d, out of order", i, r.Attempt, d.Attempts)
		}
		prev = r.Attempt
		unknown = unknown || r.Outcome == Unknown
	}
	var last *Receipt
	if n := len(receipts); n > 0 {
		last = &receipts[n-1]
	}
	switch {
	case d.Latest == attemptPending && last != nil && last.Attempt == d.Attempts:
		return bad("latest %q, but attempt %d has a receipt (%s)", d.Latest, d.Attempts, last.Outcome)
	case d.Latest != attemptPending && d.Latest != attemptNone &&
		(last == nil || last.Attempt != d.Attempts || string(last.Outcome) != d.Latest):
		return bad("latest %q, but no receipt says attempt %d ended so", d.Latest, d.Attempts)
	case unknown && !d.NoReplay:
		return refused(fmt.Errorf("no-replay flag cleared although a receipt says unknown: %w", ErrNoReplay))
	case !unknown && d.NoReplay:
		return refused(errors.New("no-replay flag set although no receipt says unknown"))
	}
	return nil
}
