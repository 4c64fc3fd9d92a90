// Package outcome is the one rule every store of the module uses to say what a write's error
// proves: whether the server answered, and what it applied. A definite refusal is reported as
// such (as execstore.ErrInvalid for a document past the 16 MiB size limit, on every server the
// store accepts; as execstore.ErrRolledBack for a statement the server rolled back for a lock
// conflict); anything that may or may not have been applied becomes an
// *execstore.OutcomeUnknownError, never a plain failure.
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

// Server error codes that mean a document would outgrow the 16 MiB size limit.
const (
	// codeBadValue: an insert past the limit, "object to insert too large" from MongoDB,
	// "Size N is larger than MaxDocumentSize 16777216" from FerretDB 2.x and DocumentDB. Only
	// with one of tooLargeMessages: BadValue says many other things.
	codeBadValue = 2
	// codeObjectTooLarge: BSONObjectTooLarge, a command or an update's result past the limit.
	codeObjectTooLarge = 10334
	// codeDocumentTooLarge: an update or findAndModify that would grow a document past the
	// limit (MongoDB; FerretDB 2.x for findAndModify).
	codeDocumentTooLarge = 17419
	codeDocTooLargeOld   = 17420
	// codeDocumentDBTooLarge: an update that would grow a document past the limit, on FerretDB
	// 2.x and DocumentDB: DocumentDB's own BSONObjectTooLarge (SQLSTATE M003A), which the
	// server passes on as the write error's code.
	codeDocumentDBTooLarge = 285999133
)

// tooLargeMessages are the messages that make a BadValue a refusal for size.
var tooLargeMessages = []string{"too large", "larger than MaxDocumentSize"}

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
	// The document a findAndModify or an update would make is past the size limit: checked
	// before it is written, on every attempt alike.
	codeDocumentDBTooLarge: true,
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
	// were not applied, and the others were, as its counts say. That holds for a statement
	// the server rolled back for a lock conflict (a deadlock, a lock timeout, a serialization
	// failure, a write conflict) too: see IsRolledBack.
	WriteErrors
	// NotDurable: the server ran the command and applied what it reports, but the write
	// concern was not met: the applied statements may still be rolled back by a failover.
	NotDurable
)

// Classify says what err, returned by the driver for a write command, proves. A write error
// is a definite answer for its statement whatever its code; a command error is one only when
// its code is among those that prove the command was refused before it ran. So a lock
// conflict the server reports as a statement's write error (a PostgreSQL-backed server's
// "deadlock detected", a lock timeout, a serialization failure; MongoDB's WriteConflict,
// LockTimeout, LockBusy) is WriteErrors, that statement not applied, while the same reported
// as a command error, or with a NetworkError or RetryableWriteError label, is Unanswered.
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

// Nouns of what a write or read is about when it is not an execution, as the errors of the
// idempotency-key store and the operation journal name it (WriteFailureOf, ReadFailureOf).
const (
	NounIdempotencyKey = "idempotency key"
	NounInvocation     = "journal invocation"
)

// subject is id as an error text names it, after its noun: `execution "id"` when noun is
// empty.
func subject(noun, id string) string {
	if noun == "" {
		noun = "execution"
	}
	return fmt.Sprintf("%s %q", noun, id)
}

// WriteFailure is WriteFailureOf for a write of the execution id.
func WriteFailure(op, id string, err error) error { return WriteFailureOf("", op, id, err) }

// WriteFailureOf turns the error of a single write of id, which noun names (empty for an
// execution), that was handed to the driver into the store's error. A definite refusal (a write error, or a command error that proves nothing
// was applied) is reported as such: as ErrInvalid when the document is too large (IsTooLarge),
// as an error matching ErrRolledBack, and unwrapping to err, when the server rolled the write
// back for a lock conflict (IsRolledBack). Anything else may or may not have been applied and
// becomes an *execstore.OutcomeUnknownError (a write-concern error too: the write was applied
// on the primary, but may be rolled back).
func WriteFailureOf(noun, op, id string, err error) error {
	switch Classify(err) {
	case Refused, WriteErrors:
		if IsTooLarge(err) {
			return &execstore.InvalidError{Field: "document",
				Reason: fmt.Sprintf("would exceed the server's %d-byte document limit: %v", execstore.MaxDocumentBytes, err)}
		}
		if IsRolledBack(err) {
			return &rolledBackError{op: op, noun: noun, id: id, err: err}
		}
		return fmt.Errorf("execstore: %s of %s refused by the server: %w", op, subject(noun, id), callersDeadline(err))
	}
	return &execstore.OutcomeUnknownError{Op: op, ExecutionID: id, Noun: noun, Err: callersDeadline(err)}
}

// callersDeadline is err, matching context.DeadlineExceeded too when the server ended the
// command for its maxTimeMS: the driver sends the caller's deadline as maxTimeMS, a little
// shorter than what is left of it, so the server may end the write (or its wait for the
// write concern) before the context does, and that too is the caller's deadline.
func callersDeadline(err error) error {
	if deadlineOnServer(err) && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (%w, applied by the server as maxTimeMS)", err, context.DeadlineExceeded)
	}
	return err
}

// codeMaxTimeMSExpired is the server's error, or write-concern error, when a command's
// maxTimeMS runs out.
const codeMaxTimeMSExpired = 50

// codeQueryCanceled is PostgreSQL's query_canceled (SQLSTATE 57014, see sqlState), the code of the write error DocumentDB reports for a statement that its
// statement timeout, which FerretDB sets from maxTimeMS, ended and rolled back.
var codeQueryCanceled = sqlState("57014")

// deadlineOnServer reports whether err says the server ran out the command's maxTimeMS.
func deadlineOnServer(err error) bool {
	var se mongo.ServerError
	if errors.As(err, &se) && se.HasErrorCode(codeMaxTimeMSExpired) {
		return true
	}
	for _, we := range writeErrorsOf(err) {
		if we.code == codeQueryCanceled && strings.Contains(we.message, "statement timeout") {
			return true
		}
	}
	return false
}

// IsTooLarge reports whether a refusal says a document is past the 16 MiB size limit: the
// driver's ErrDocumentTooLarge (it would not send the document), or a write error or command
// error the server gave for it. MongoDB refuses an insert past the limit with BadValue
// ("object to insert too large"), an update or findAndModify that would grow a document past
// it with 17419, a command past it with 10334. FerretDB 2.x and DocumentDB refuse an insert
// with BadValue ("Size N is larger than MaxDocumentSize 16777216"), an update with 285999133
// (same message), a findAndModify with 17419. A write-concern error is never one.
func IsTooLarge(err error) bool {
	if errors.Is(err, driver.ErrDocumentTooLarge) {
		return true
	}
	for _, se := range serverErrorsOf(err) {
		if tooLarge(se.code, se.message) {
			return true
		}
	}
	return false
}

// tooLarge reports whether the server's error of code and message is a refusal for size.
func tooLarge(code int, message string) bool {
	switch code {
	case codeObjectTooLarge, codeDocumentTooLarge, codeDocTooLargeOld, codeDocumentDBTooLarge:
		return true
	case codeBadValue:
		for _, m := range tooLargeMessages {
			if strings.Contains(message, m) {
				return true
			}
		}
	}
	return false
}

// ReadFailure is ReadFailureOf for a read of the execution id.
func ReadFailure(op, id string, err error) error { return ReadFailureOf("", op, id, err) }

// ReadFailureOf wraps the error of a read of id, which noun names (empty for an execution); a
// context error is returned as is so that callers can compare it with ctx.Err().
func ReadFailureOf(noun, op, id string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	of := fmt.Sprintf("%q", id)
	if noun != "" {
		of = subject(noun, id)
	}
	return fmt.Errorf("execstore: %s of %s: %w", op, of, err)
}

// serverError is one error the server reported: a command error, or one write error.
type serverError struct {
	code    int
	message string
}

// writeErrorsOf returns the write errors of err's bulk write or write exception, looked for
// in the order Classify looks; nil when err is neither.
func writeErrorsOf(err error) []serverError {
	var bwe mongo.BulkWriteException
	if errors.As(err, &bwe) {
		out := make([]serverError, len(bwe.WriteErrors))
		for i, we := range bwe.WriteErrors {
			out[i] = serverError{we.Code, we.Message}
		}
		return out
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		out := make([]serverError, len(we.WriteErrors))
		for i, e := range we.WriteErrors {
			out[i] = serverError{e.Code, e.Message}
		}
		return out
	}
	return nil
}

// serverErrorsOf returns the errors the server reported in err: the write errors of a bulk
// write or write exception, or a command error's code and message. A write-concern error is
// not among them: it is about durability, not about a statement.
func serverErrorsOf(err error) []serverError {
	if ses := writeErrorsOf(err); ses != nil {
		return ses
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return []serverError{{int(ce.Code), ce.Message}}
	}
	return nil
}
