package journal

import (
	"errors"
	"fmt"
	"strings"

	"github.com/execstore/execstore"
)

// Sentinel errors of the journal; match them with errors.Is and inspect the typed errors
// with errors.As. Besides these, a write whose outcome is unknown, or a read that decides
// the caller's next step and failed, returns an *execstore.OutcomeUnknownError
// (execstore.ErrOutcomeUnknown), bad input an
// *execstore.InvalidError (execstore.ErrInvalid), a missing invocation execstore.ErrNotFound,
// and a call after Close execstore.ErrClosed.
var (
	// ErrBinding: the invocation id exists with another scope or request digest. See
	// BindingError.
	ErrBinding = errors.New("journal: invocation id bound to another request")
	// ErrIntegrity: a stored ciphertext or document was refused on read (altered, copied
	// from another invocation, claim or phase, or sealed under a key the cipher lacks; or
	// attempt flags that its authenticated receipts contradict). See IntegrityError.
	ErrIntegrity = errors.New("journal: stored record refused")
	// ErrCheckpointMismatch: Prepare named a checkpoint that is not the stored one; nothing
	// was written. See CheckpointMismatchError.
	ErrCheckpointMismatch = errors.New("journal: not the stored checkpoint")
	// ErrNoReplay: an attempt of the invocation ended UNKNOWN, so its prepared operation is
	// never handed out again; reconcile it against the outside system instead.
	ErrNoReplay = errors.New("journal: an attempt's outcome is unknown: the operation is never handed out again")
	// ErrState: the invocation is not in a state that permits the call (nothing prepared,
	// an attempt without a receipt, …); nothing was written. See StateError.
	ErrState = errors.New("journal: not permitted in the invocation's state")
	// ErrUncertain: a write of this Journal had an unknown outcome, or a read that decides
	// the caller's next step failed (VerifyOwner, Reverify, the read after a guarded write
	// matched nothing), so it refuses every mutation until Reverify has read the
	// invocations concerned. See UncertainError.
	ErrUncertain = errors.New("journal: uncertain after an unknown outcome; Reverify first")
)

// OwnerConflictError reports a mutation or VerifyOwner whose owner or revision is not the
// stored one; nothing was written. It matches execstore.ErrConflict.
type OwnerConflictError struct {
	InvocationID     string
	ExpectedOwner    string
	FoundOwner       string
	ExpectedRevision int64 // 0 for a claim
	FoundRevision    int64
}

func (e *OwnerConflictError) Error() string {
	return fmt.Sprintf("journal: invocation %q: expected owner %q at revision %d, found owner %q at revision %d",
		e.InvocationID, e.ExpectedOwner, e.ExpectedRevision, e.FoundOwner, e.FoundRevision)
}

// Is makes errors.Is(err, execstore.ErrConflict) true.
func (e *OwnerConflictError) Is(target error) bool { return target == execstore.ErrConflict }

// BindingError reports an invocation id stored with another scope or request digest. It
// matches ErrBinding.
type BindingError struct {
	InvocationID string
	Field        string // "scope" or "digest": the first that differs
}

func (e *BindingError) Error() string {
	return fmt.Sprintf("journal: invocation %q exists with another %s", e.InvocationID, e.Field)
}

// Is makes errors.Is(err, ErrBinding) true.
func (e *BindingError) Is(target error) bool { return target == ErrBinding }

// IntegrityError reports stored data refused on read. It matches ErrIntegrity and unwraps
// to the cause (the cipher's error, a decoding error, or what the attempt flags contradict:
// a no-replay flag cleared against a receipt that says unknown unwraps to ErrNoReplay); it
// never carries the data.
type IntegrityError struct {
	InvocationID string
	What         string // "checkpoint", "operation", "receipt 2", "attempt flags", "document"
	Err          error
}

func (e *IntegrityError) Error() string {
	return fmt.Sprintf("journal: invocation %q: stored %s refused: %v", e.InvocationID, e.What, e.Err)
}

// Is makes errors.Is(err, ErrIntegrity) true.
func (e *IntegrityError) Is(target error) bool { return target == ErrIntegrity }

// Unwrap returns the cause.
func (e *IntegrityError) Unwrap() error { return e.Err }

// CheckpointMismatchError reports a Prepare whose checkpoint is not the stored one. It
// matches ErrCheckpointMismatch and execstore.ErrConflict.
type CheckpointMismatchError struct {
	InvocationID string
	Expected     string // the checkpoint Prepare named
	Found        string // the stored one; "" when there is none
}

func (e *CheckpointMismatchError) Error() string {
	return fmt.Sprintf("journal: invocation %q: prepare continues from checkpoint %q, stored is %q",
		e.InvocationID, e.Expected, e.Found)
}

// Is makes errors.Is true for ErrCheckpointMismatch and execstore.ErrConflict.
func (e *CheckpointMismatchError) Is(target error) bool {
	return target == ErrCheckpointMismatch || target == execstore.ErrConflict
}

// StateError reports a call the invocation's state does not permit. It matches ErrState,
// and ErrNoReplay when that is the reason.
type StateError struct {
	InvocationID string
	Op           string
	Reason       string
	noReplay     bool
}

func (e *StateError) Error() string {
	return fmt.Sprintf("journal: %s of invocation %q refused: %s", e.Op, e.InvocationID, e.Reason)
}

// Is makes errors.Is true for ErrState, and for ErrNoReplay when that is why.
func (e *StateError) Is(target error) bool {
	return target == ErrState || (e.noReplay && target == ErrNoReplay)
}

// UncertainError reports a mutation refused because earlier writes had unknown outcomes,
// or earlier deciding reads failed. It matches ErrUncertain.
type UncertainError struct {
	InvocationIDs []string // the invocations to Reverify
}

func (e *UncertainError) Error() string {
	return fmt.Sprintf("journal: refusing mutations after unknown outcomes; Reverify %s first",
		strings.Join(quoted(e.InvocationIDs), ", "))
}

// Is makes errors.Is(err, ErrUncertain) true.
func (e *UncertainError) Is(target error) bool { return target == ErrUncertain }

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// notFoundError reports an invocation that does not exist. It matches execstore.ErrNotFound,
// and its text names the invocation, never an execution.
type notFoundError struct {
	op, id string
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("journal: %s of invocation %q: no such invocation", e.op, e.id)
}

// Is makes errors.Is(err, execstore.ErrNotFound) true.
func (e *notFoundError) Is(target error) bool { return target == execstore.ErrNotFound }
