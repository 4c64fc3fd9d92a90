// Package outcome is the one rule every store of the module uses to say what a write's error
// proves: whether the server answered, and what it applied. A definite refusal is reported as
// such (or as execstore.ErrInvalid for a document past MongoDB's size limit); anything that may
// or may not have been applied becomes an *execstore.OutcomeUnknownError, never a plain failure.
package outcome

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"

	"github.com/execstore/execstore"
)

// Server error codes that mean a document would outgrow MongoDB's size limit.
const (
	codeBadValue         = 2 // an insert past the limit: "object to insert too large"
	codeObjectTooLarge   = 10334
	codeDocumentTooLarge = 17419
	codeDocTooLargeOld   = 17420
)

// refusedCodes are the command-level error codes that prove the server applied nothing of a
// write command: it was refused before any statement ran, because the caller may not run it
// (auth) or because it could not be parsed or validated. A retried command cannot end in one
// of these after a first attempt that applied something: the retry carries the same command
// and the same credentials. Every other command-level error (an interruption, a shutdown, a
// killOp, a step-down, a time limit, a code this list does not know) may come after some
// statements were applied, and leaves the write's outcome unknown.
var refusedCodes = map[int32]bool{
	codeBadValue:         true,
	9:                    true, // FailedToParse
	13:                   true, // Unauthorized
	14:                   true, // TypeMismatch
	18:                   true, // AuthenticationFailed
	40:                   true, // ConflictingUpdateOperators
	52:                   true, // DollarPrefixedFieldName
	56:                   true, // EmptyFieldName
	57:                   true, // DottedFieldName
	59:                   true, // CommandNotFound
	72:                   true, // InvalidOptions
	73:                   true, // InvalidNamespace
	115:                  true, // CommandNotSupported
	238:                  true, // NotImplemented (FerretDB, for what it lacks)
	codeObjectTooLarge:   true, // BSONObjectTooLarge: the command itself is too large
	codeDocumentTooLarge: true,
	codeDocTooLargeOld:   true,
}

// Answer is what a write command's error proves about what the server did. It is the
// one classification every write path uses: a single write, a group commit and a bulk of
// acks all ask it the same question, "did the server answer, and what did it apply?".
type Answer int

const (
	// Unanswered: no answer came back, or one that proves nothing (a network error, a
	// timeout, the caller's context ending, an interruption after some statements ran, an
	// unacknowledged write). The server may or may not have applied any statement.
	Unanswered Answer = iota
	// Refused: the server refused the whole command before running it; nothing was applied.
	Refused
	// WriteErrors: the server ran the command; the statements it reported write errors for
	// were not applied, and the others were, as its counts say.
	WriteErrors
	// NotDurable: the server ran the command and applied what it reports, but the write
	// concern was not met: the applied statements may still be rolled back by a failover.
	NotDurable
)

// Classify says what err, returned by the driver for a write command, proves.
func Classify(err error) Answer {
	// A write or bulk write exception is the server's answer, whatever labels it carries: a
	// write-concern error in it says the statements ran, not that nothing happened.
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		return answerOf(bwe.WriteConcernError, len(bwe.WriteErrors), bwe.Labels)
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		return answerOf(we.WriteConcernError, len(we.WriteErrors), we.Labels)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		mongo.IsTimeout(err) || mongo.IsNetworkError(err) {
		return Unanswered
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		if refusedCodes[ce.Code] && !ce.HasErrorLabel("NetworkError") &&
			!ce.HasErrorLabel("RetryableWriteError") {
			return Refused
		}
		return Unanswered
	}
	if errors.Is(err, driver.ErrDocumentTooLarge) {
		return Refused // the driver would not send it
	}
	return Unanswered
}

func answerOf(wce *mongo.WriteConcernError, nWriteErrors int, labels []string) Answer {
	switch {
	case wce != nil:
		return NotDurable
	case nWriteErrors > 0:
		for _, l := range labels {
			if l == "NetworkError" || l == "RetryableWriteError" {
				return Unanswered
			}
		}
		return WriteErrors
	}
	return Unanswered // a write exception with neither: proves nothing
}

// WriteFailure turns the error of a single write that was handed to the driver into the
// store's error. A definite refusal (a write error, or a command error that proves nothing
// was applied) is reported as such, or as ErrInvalid when the document is too large;
// anything else may or may not have been applied and becomes an
// *execstore.OutcomeUnknownError (a write-concern error too: the write was applied on the
// primary, but may be rolled back).
func WriteFailure(op, id string, err error) error {
	switch Classify(err) {
	case Refused, WriteErrors:
		if IsTooLarge(err) {
			return &execstore.InvalidError{Field: "document",
				Reason: fmt.Sprintf("would exceed MongoDB's %d-byte document limit: %v", execstore.MaxDocumentBytes, err)}
		}
		return fmt.Errorf("execstore: %s of execution %q refused by the server: %w", op, id, err)
	}
	if deadlineOnServer(err) {
		// The driver sends the caller's deadline as maxTimeMS, a little shorter than what is
		// left of it, so the server may end the write (or its wait for the write concern)
		// before the context does: that too is the caller's deadline.
		err = fmt.Errorf("%w (%w, applied by the server as maxTimeMS)", err, context.DeadlineExceeded)
	}
	return &execstore.OutcomeUnknownError{Op: op, ExecutionID: id, Err: err}
}

// codeMaxTimeMSExpired is the server's error, or write-concern error, when a command's
// maxTimeMS runs out.
const codeMaxTimeMSExpired = 50

// deadlineOnServer reports whether err says the server ran out the command's maxTimeMS.
func deadlineOnServer(err error) bool {
	var se mongo.ServerError
	return errors.As(err, &se) && se.HasErrorCode(codeMaxTimeMSExpired)
}

// IsTooLarge reports whether a refusal says a document is past MongoDB's size limit. An
// insert past it is refused with BadValue ("object to insert too large"), an update that
// would grow a document past it with 17419, a command past it with 10334.
func IsTooLarge(err error) bool {
	if errors.Is(err, driver.ErrDocumentTooLarge) {
		return true
	}
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	if se.HasErrorCode(codeObjectTooLarge) || se.HasErrorCode(codeDocumentTooLarge) ||
		se.HasErrorCode(codeDocTooLargeOld) {
		return true
	}
	return se.HasErrorCode(codeBadValue) && strings.Contains(err.Error(), "too large")
}

// ReadFailure wraps the error of a read; a context error is returned as is so that callers can
// compare it with ctx.Err().
func ReadFailure(op, id string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("execstore: %s of %q: %w", op, id, err)
}
