package outcome

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver"

	"github.com/execstore/execstore"
)

// MongoDB's refusal of a document past 16 MiB is a definite failure reported as ErrInvalid.
func TestWriteFailureTooLarge(t *testing.T) {
	for _, code := range []int{17419, 10334} {
		err := WriteFailure("commit", "x", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: code, Message: "too large"}}})
		assert.ErrorIs(t, err, execstore.ErrInvalid, "code %d", code)
		assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown)
	}
}

// A document past 16 MiB is refused, nothing applied, and reported as ErrInvalid on every
// server the store accepts, for an update, an insert and a findAndModify, alone or in a bulk;
// each error as the driver returns it (a findAndModify's as a CommandError, an update's or
// insert's as a WriteException, a bulk's as a BulkWriteException).
func TestTooLargeOnEveryServer(t *testing.T) {
	const (
		mongoUpdate = "Resulting document after update is larger than 16777216"
		mongoInsert = "object to insert too large. size in bytes: 17825890, max size: 16777216"
		ferretSize  = "Size 17825890 is larger than MaxDocumentSize 16777216"
	)
	writeErr := func(code int, msg string) error {
		return mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: code, Message: msg}}}
	}
	bulkErr := func(code int, msg string) error {
		return mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Code: code, Message: msg}}}}
	}
	for _, tc := range []struct {
		name string
		err  error
		want Answer
	}{
		{"MongoDB update", writeErr(17419, mongoUpdate), WriteErrors},
		{"MongoDB update, BSONObjectTooLarge", writeErr(10334, "BSONObj size: 17825890 (0x1100062) is invalid"), WriteErrors},
		{"MongoDB update in a bulk", bulkErr(17419, mongoUpdate), WriteErrors},
		{"MongoDB findAndModify", mongo.CommandError{Code: 17419, Message: mongoUpdate}, Refused},
		{"MongoDB insert", writeErr(2, mongoInsert), WriteErrors},
		{"MongoDB insert in a bulk", bulkErr(2, mongoInsert), WriteErrors},
		{"driver refuses to send it", driver.ErrDocumentTooLarge, Refused},
		{"driver refusal wrapped", fmt.Errorf("insert: %w", driver.ErrDocumentTooLarge), Refused},
		{"FerretDB 2.x update", writeErr(285999133, ferretSize), WriteErrors},
		{"FerretDB 2.x update in a bulk", bulkErr(285999133, ferretSize), WriteErrors},
		{"FerretDB 2.x update as a command error", mongo.CommandError{Code: 285999133, Message: ferretSize}, Refused},
		{"FerretDB 2.x findAndModify", mongo.CommandError{Code: 17419, Message: ferretSize}, Refused},
		{"FerretDB 2.x findAndModify, BSONObjectTooLarge", mongo.CommandError{Code: 10334, Message: ferretSize}, Refused},
		{"FerretDB 2.x insert", writeErr(2, ferretSize), WriteErrors},
		{"FerretDB 2.x insert in a bulk", bulkErr(2, ferretSize), WriteErrors},
		{"FerretDB 2.x insert as a command error", mongo.CommandError{Code: 2, Name: "BadValue", Message: ferretSize}, Refused},
	} {
		assert.Equal(t, tc.want, Classify(tc.err), "%s: a definite refusal", tc.name)
		assert.True(t, IsTooLarge(tc.err), tc.name)
		err := WriteFailure("commit", "x", tc.err)
		assert.ErrorIs(t, err, execstore.ErrInvalid, tc.name)
		assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, tc.name)
		assert.NotErrorIs(t, err, execstore.ErrRolledBack, tc.name)
	}
}

// Errors that are not a refusal for size, or prove nothing, stay what they were.
func TestNotTooLarge(t *testing.T) {
	wce := &mongo.WriteConcernError{Code: 64, Name: "WriteConcernFailed"}
	for _, tc := range []struct {
		name      string
		err       error
		tooLarge  bool
		wantError error // what WriteFailure's error matches
	}{
		{"another BadValue", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 2, Message: "unknown operator: $foo"}}}, false, nil},
		{"another BadValue in a bulk", mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Code: 2, Message: "bad value"}}}}, false, nil},
		{"the size message with another code", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 11000, Message: "Size 17825890 is larger than MaxDocumentSize 16777216"}}}, false, nil},
		{"too large but the answer was lost", mongo.CommandError{Code: 285999133, Labels: []string{"NetworkError"}}, true, execstore.ErrOutcomeUnknown},
		{"too large with a write-concern error", mongo.WriteException{WriteConcernError: wce, WriteErrors: mongo.WriteErrors{{Code: 285999133}}}, true, execstore.ErrOutcomeUnknown},
		{"a write-concern error's code is not a statement's", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 17419}}, false, execstore.ErrOutcomeUnknown},
	} {
		assert.Equal(t, tc.tooLarge, IsTooLarge(tc.err), tc.name)
		err := WriteFailure("commit", "x", tc.err)
		assert.NotErrorIs(t, err, execstore.ErrInvalid, tc.name)
		if tc.wantError != nil {
			assert.ErrorIs(t, err, tc.wantError, tc.name)
		} else {
			assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, tc.name)
		}
	}
}

func TestWriteFailureClassification(t *testing.T) {
	assert.ErrorIs(t, WriteFailure("commit", "x", context.DeadlineExceeded), execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, WriteFailure("commit", "x", context.DeadlineExceeded), context.DeadlineExceeded)
	assert.ErrorIs(t, WriteFailure("commit", "x", errors.New("connection reset")), execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, WriteFailure("commit", "x", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}}),
		execstore.ErrOutcomeUnknown, "a write-concern error: applied on the primary, maybe not durably")
	refusal := WriteFailure("commit", "x", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 2, Message: "bad value"}}})
	assert.NotErrorIs(t, refusal, execstore.ErrOutcomeUnknown)
	assert.NotErrorIs(t, refusal, execstore.ErrInvalid)
	assert.NotErrorIs(t, WriteFailure("commit", "x", mongo.CommandError{Code: 13, Message: "unauthorized"}), execstore.ErrOutcomeUnknown,
		"the server refused the command: nothing was applied")
	assert.ErrorIs(t, WriteFailure("commit", "x", mongo.CommandError{Code: 6, Labels: []string{"NetworkError"}}), execstore.ErrOutcomeUnknown)
}

// One rule for every write path: a command-level error proves nothing was applied only when
// its code says the command was refused before it ran; anything else leaves the outcome
// unknown.
func TestClassifyWrite(t *testing.T) {
	wce := &mongo.WriteConcernError{Code: 64, Name: "WriteConcernFailed"}
	for _, tc := range []struct {
		name string
		err  error
		want Answer
	}{
		{"context canceled", context.Canceled, Unanswered},
		{"deadline", context.DeadlineExceeded, Unanswered},
		{"plain error", errors.New("connection reset by peer"), Unanswered},
		{"network error label", mongo.CommandError{Code: 6, Labels: []string{"NetworkError"}}, Unanswered},
		{"interrupted", mongo.CommandError{Code: 11601, Name: "Interrupted"}, Unanswered},
		{"interrupted at shutdown", mongo.CommandError{Code: 11600, Name: "InterruptedAtShutdown"}, Unanswered},
		{"max time", mongo.CommandError{Code: 50, Name: "MaxTimeMSExpired"}, Unanswered},
		{"not primary", mongo.CommandError{Code: 10107, Name: "NotWritablePrimary"}, Unanswered},
		{"unknown code", mongo.CommandError{Code: 12345}, Unanswered},
		{"refusal code but retryable label", mongo.CommandError{Code: 13, Labels: []string{"RetryableWriteError"}}, Unanswered},
		{"unauthorized", mongo.CommandError{Code: 13, Name: "Unauthorized"}, Refused},
		{"authentication failed", mongo.CommandError{Code: 18}, Refused},
		{"failed to parse", mongo.CommandError{Code: 9}, Refused},
		{"bad value", mongo.CommandError{Code: 2}, Refused},
		{"not implemented (FerretDB)", mongo.CommandError{Code: 238}, Refused},
		{"write error", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 11000}}}, WriteErrors},
		{"write-concern error", mongo.WriteException{WriteConcernError: wce}, NotDurable},
		{"write-concern error and write error", mongo.WriteException{WriteConcernError: wce, WriteErrors: []mongo.WriteError{{Code: 2}}}, NotDurable},
		{"write exception with neither", mongo.WriteException{}, Unanswered},
		{"bulk write errors", mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Code: 2}}}}, WriteErrors},
		{"bulk write-concern error", mongo.BulkWriteException{WriteConcernError: wce}, NotDurable},
		{"bulk write-concern timeout labelled", mongo.BulkWriteException{WriteConcernError: &mongo.WriteConcernError{Code: 50}, Labels: []string{"ExceededTimeLimitError"}}, NotDurable},
		{"bulk write errors with network label", mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{}}, Labels: []string{"NetworkError"}}, Unanswered},
		{"unacknowledged", driver.ErrUnacknowledgedWrite, Unanswered},
		{"driver refuses a document too large", driver.ErrDocumentTooLarge, Refused},
	} {
		assert.Equal(t, tc.want, Classify(tc.err), tc.name)
	}
}

// A single write: interruptions and unknown command errors are unknown outcomes; an insert
// MongoDB refuses for its size is ErrInvalid.
func TestWriteFailureCommandErrors(t *testing.T) {
	for _, code := range []int32{11601, 11600, 50, 189, 91, 12345} {
		err := WriteFailure("commit", "x", mongo.CommandError{Code: code})
		assert.ErrorIs(t, err, execstore.ErrOutcomeUnknown, "code %d", code)
	}
	tooLarge := WriteFailure("commit", "x", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 2, Message: "object to insert too large. size in bytes: 16777300, max size: 16777216"}}})
	assert.ErrorIs(t, tooLarge, execstore.ErrInvalid)
	assert.NotErrorIs(t, tooLarge, execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, WriteFailure("commit", "x", driver.ErrDocumentTooLarge), execstore.ErrInvalid)
}

// The caller's deadline, sent as maxTimeMS, may run out on the server before the context does:
// the write's outcome is unknown, and the error says it was the deadline.
func TestWriteFailureServerDeadline(t *testing.T) {
	for _, err := range []error{
		mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 50, Name: "MaxTimeMSExpired"}},
		mongo.BulkWriteException{WriteConcernError: &mongo.WriteConcernError{Code: 50}},
		mongo.CommandError{Code: 50, Name: "MaxTimeMSExpired"},
	} {
		got := WriteFailure("commit", "x", err)
		assert.ErrorIs(t, got, execstore.ErrOutcomeUnknown, "%T", err)
		assert.ErrorIs(t, got, context.DeadlineExceeded, "%T", err)
	}
	got := WriteFailure("commit", "x", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}})
	assert.NotErrorIs(t, got, context.DeadlineExceeded, "another write-concern error is not the deadline")

	// DocumentDB ends a statement at its statement timeout (FerretDB sets it from maxTimeMS)
	// and rolls it back: a write error, so not applied, and the caller's deadline.
	assert.Equal(t, 67371461, codeQueryCanceled)
	timedOut := mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: codeQueryCanceled, Message: "canceling statement due to statement timeout"}}}
	got = WriteFailure("commit", "x", timedOut)
	assert.NotErrorIs(t, got, execstore.ErrOutcomeUnknown, "a write error: the statement was rolled back")
	assert.ErrorIs(t, got, context.DeadlineExceeded)
	cancelled := mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: codeQueryCanceled, Message: "canceling statement due to user request"}}}
	assert.NotErrorIs(t, WriteFailure("commit", "x", cancelled), context.DeadlineExceeded, "a cancel is not the deadline")
}
