package execstore

import (
	"errors"
	"fmt"
)

// Sentinel errors. Match them with errors.Is. Inspect details with errors.As on the
// corresponding *…Error type.
var (
	// ErrConflict: the commit's version guard failed. Nothing was written. See ConflictError.
	ErrConflict = errors.New("execstore: version conflict")
	// ErrOutcomeUnknown: a write was sent but its result never came back. The server may or
	// may not have applied it. Reload before doing anything else. See OutcomeUnknownError.
	ErrOutcomeUnknown = errors.New("execstore: outcome unknown")
	// ErrClosed: the store is closed, or closing, and takes no new calls.
	ErrClosed = errors.New("execstore: store closed")
	// ErrOverloaded: a non-blocking submit found the request queue full.
	ErrOverloaded = errors.New("execstore: request queue full")
	// ErrInvalid: bad input, refused before any I/O. See InvalidError.
	ErrInvalid = errors.New("execstore: invalid input")
	// ErrNotFound: the operation needs an execution that does not exist.
	ErrNotFound = errors.New("execstore: execution not found")
	// ErrAlreadyProcessed: the commit carried a ProcessedEventID that is already in the
	// execution's dedupe set. Nothing was written. The event was handled before, so ack it
	// and move on. See AlreadyProcessedError.
	ErrAlreadyProcessed = errors.New("execstore: event already processed")
	// ErrRolledBack: the server rolled the write back for a lock conflict (a deadlock, a
	// lock timeout, a serialization failure or a write conflict). Nothing was written, and
	// it is safe to send again as is. The error unwraps to the driver's. Servers that lock
	// rows (PostgreSQL-backed ones) report it under contention. MongoDB seldom does.
	ErrRolledBack = errors.New("execstore: write rolled back by the server for a lock conflict")
)

// NoVersion is ConflictError.Found when no document exists.
const NoVersion int64 = -1

// ConflictError reports a failed version guard. It matches ErrConflict.
type ConflictError struct {
	ExecutionID string
	Expected    int64 // the version the caller committed against
	Found       int64 // the stored version, or NoVersion when there is no document
}

func (e *ConflictError) Error() string {
	found := "none"
	if e.Found != NoVersion {
		found = fmt.Sprint(e.Found)
	}
	return fmt.Sprintf("execstore: conflict on execution %q: expected version %d, found %s",
		e.ExecutionID, e.Expected, found)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// AlreadyProcessedError reports a commit refused because its ProcessedEventID is already in
// the execution's dedupe set. The event was handled by an earlier commit. Nothing of this one
// was written, and the caller's exe is unchanged. It matches ErrAlreadyProcessed. A commit
// whose event is processed and whose version is stale reports this error rather than a
// conflict, since reloading would not make the event worth handling again.
type AlreadyProcessedError struct {
	ExecutionID string
	EventID     string
	// Version is the execution's stored version when the store found the event in its
	// dedupe set. It is the version created by the commit that recorded the event, or a
	// later one.
	Version int64
}

func (e *AlreadyProcessedError) Error() string {
	return fmt.Sprintf("execstore: event %q already processed by execution %q (found at version %d); nothing was written",
		e.EventID, e.ExecutionID, e.Version)
}

// Is makes errors.Is(err, ErrAlreadyProcessed) true.
func (e *AlreadyProcessedError) Is(target error) bool { return target == ErrAlreadyProcessed }

// OutcomeUnknownError reports a write whose effect is unknown. It matches ErrOutcomeUnknown
// and unwraps to the cause (a context error, a network error, …).
type OutcomeUnknownError struct {
	Op          string // the operation, e.g. "commit"
	ExecutionID string // what it wrote: an execution's id, or the id Noun names
	// Noun names what ExecutionID is when it is not an execution's id: "idempotency key"
	// (package idem), "journal invocation" (package journal). It is empty for an execution.
	Noun string
	Err  error
}

func (e *OutcomeUnknownError) Error() string {
	of := fmt.Sprintf("%q", e.ExecutionID)
	if e.Noun != "" {
		of = e.Noun + " " + of
	}
	return fmt.Sprintf("execstore: %s of %s: outcome unknown (read it back before retrying): %v", e.Op, of, e.Err)
}

// Unwrap returns ErrOutcomeUnknown and the cause, so that errors.Is matches both.
func (e *OutcomeUnknownError) Unwrap() []error { return []error{ErrOutcomeUnknown, e.Err} }

// InvalidError reports bad input, naming the offending field. It matches ErrInvalid.
type InvalidError struct {
	Field  string // e.g. "Execution.ID", "Commit.Timers[2].FireAt"
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("execstore: invalid %s: %s", e.Field, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *InvalidError) Is(target error) bool { return target == ErrInvalid }
