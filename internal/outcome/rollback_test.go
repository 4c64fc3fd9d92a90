package outcome

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
)

// The packing of a SQLSTATE is PostgreSQL's: it gives the codes the servers are known to send
// for DocumentDB's own SQLSTATEs (M0001 is BadValue, M003A the size refusal).
func TestSQLState(t *testing.T) {
	assert.Equal(t, 16777245, sqlState("M0001"))
	assert.Equal(t, codeDocumentDBTooLarge, sqlState("M003A"))
	assert.Equal(t, 16908292, sqlState("40P01"))
	assert.Equal(t, 50463045, sqlState("55P03"))
	assert.Equal(t, 16777220, sqlState("40001"))
}

// A statement the server reports it rolled back for a lock conflict was not applied: a
// definite answer, ErrRolledBack for a single write. The same reported at the command level,
// or with a label saying the answer may be lost, proves nothing.
func TestRolledBack(t *testing.T) {
	const (
		deadlockCode      = 16908292 // SQLSTATE 40P01
		lockTimeoutCode   = 50463045 // SQLSTATE 55P03
		serializationCode = 16777220 // SQLSTATE 40001
	)
	wce := &mongo.WriteConcernError{Code: 64, Name: "WriteConcernFailed"}
	deadlock := mongo.WriteError{Code: deadlockCode, Message: "deadlock detected"}
	dupKey := mongo.WriteError{Code: 11000, Message: "E11000 duplicate key error"}
	writeErr := func(wes ...mongo.WriteError) mongo.WriteException {
		return mongo.WriteException{WriteErrors: mongo.WriteErrors(wes)}
	}
	bulkErr := func(wes ...mongo.WriteError) mongo.BulkWriteException {
		b := mongo.BulkWriteException{}
		for _, we := range wes {
			b.WriteErrors = append(b.WriteErrors, mongo.BulkWriteError{WriteError: we})
		}
		return b
	}
	labelled := func(we mongo.WriteException, labels ...string) mongo.WriteException {
		we.Labels = labels
		return we
	}
	for _, tc := range []struct {
		name       string
		err        error
		want       Answer
		rolledBack bool
	}{
		// Per-statement write errors: rolled back, not applied.
		{"PostgreSQL deadlock", writeErr(deadlock), WriteErrors, true},
		{"PostgreSQL deadlock as InternalError", writeErr(mongo.WriteError{Code: 1, Message: "deadlock detected"}), WriteErrors, true},
		{"PostgreSQL deadlock, code alone", writeErr(mongo.WriteError{Code: deadlockCode}), WriteErrors, true},
		{"PostgreSQL lock timeout", writeErr(mongo.WriteError{Code: lockTimeoutCode, Message: "canceling statement due to lock timeout"}), WriteErrors, true},
		{"PostgreSQL lock timeout as InternalError", writeErr(mongo.WriteError{Code: 1, Message: "canceling statement due to lock timeout"}), WriteErrors, true},
		{"PostgreSQL lock not obtained", writeErr(mongo.WriteError{Code: lockTimeoutCode, Message: `could not obtain lock on row in relation "documents_2"`}), WriteErrors, true},
		{"PostgreSQL lock not obtained as InternalError", writeErr(mongo.WriteError{Code: 1, Message: `could not obtain lock on row in relation "documents_2"`}), WriteErrors, true},
		{"PostgreSQL serialization failure", writeErr(mongo.WriteError{Code: serializationCode, Message: "could not serialize access due to concurrent update"}), WriteErrors, true},
		{"PostgreSQL serialization failure as InternalError", writeErr(mongo.WriteError{Code: 1, Message: "could not serialize access due to concurrent update"}), WriteErrors, true},
		{"MongoDB WriteConflict", writeErr(mongo.WriteError{Code: 112, Message: "WriteConflict error: this operation conflicted with another operation"}), WriteErrors, true},
		{"MongoDB LockTimeout", writeErr(mongo.WriteError{Code: 24, Message: "Unable to acquire lock"}), WriteErrors, true},
		{"MongoDB LockBusy", writeErr(mongo.WriteError{Code: 46, Message: "lock busy"}), WriteErrors, true},
		{"wrapped", fmt.Errorf("commit: %w", writeErr(deadlock)), WriteErrors, true},
		{"bulk, every failed statement deadlocked", bulkErr(deadlock, mongo.WriteError{Index: 3, Code: deadlockCode, Message: "deadlock detected"}), WriteErrors, true},
		{"bulk, lock timeout and write conflict", bulkErr(mongo.WriteError{Code: lockTimeoutCode}, mongo.WriteError{Code: 112}), WriteErrors, true},

		// A definite answer, but not every failed statement is a rollback.
		{"bulk, a deadlock and a duplicate key", bulkErr(deadlock, dupKey), WriteErrors, false},
		{"duplicate key", writeErr(dupKey), WriteErrors, false},
		{"the message with another code", writeErr(mongo.WriteError{Code: 2, Message: "deadlock detected"}), WriteErrors, false},
		{"another internal error", writeErr(mongo.WriteError{Code: 1, Message: "tuple concurrently updated"}), WriteErrors, false},

		// Applied, maybe not durably: the write-concern error rules.
		{"deadlock with a write-concern error", mongo.WriteException{WriteConcernError: wce, WriteErrors: mongo.WriteErrors{deadlock}}, NotDurable, false},
		{"bulk deadlock with a write-concern error", mongo.BulkWriteException{WriteConcernError: wce, WriteErrors: []mongo.BulkWriteError{{WriteError: deadlock}}}, NotDurable, false},

		// The answer may be lost.
		{"deadlock labelled NetworkError", labelled(writeErr(deadlock), "NetworkError"), Unanswered, false},
		{"deadlock labelled RetryableWriteError", labelled(writeErr(deadlock), "RetryableWriteError"), Unanswered, false},
		{"bulk deadlock labelled NetworkError", mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: deadlock}}, Labels: []string{"NetworkError"}}, Unanswered, false},
		{"write exception with no write error", mongo.WriteException{}, Unanswered, false},
		{"no error", nil, Unanswered, false},

		// Command-level: not attached to a statement, so it proves nothing of the others.
		{"command deadlock as InternalError", mongo.CommandError{Code: 1, Name: "InternalError", Message: "deadlock detected"}, Unanswered, false},
		{"command deadlock, SQLSTATE code", mongo.CommandError{Code: deadlockCode, Message: "deadlock detected"}, Unanswered, false},
		{"command lock timeout", mongo.CommandError{Code: 1, Message: "canceling statement due to lock timeout"}, Unanswered, false},
		{"command serialization failure", mongo.CommandError{Code: 1, Message: "could not serialize access due to concurrent update"}, Unanswered, false},
		{"command WriteConflict", mongo.CommandError{Code: 112, Name: "WriteConflict", Labels: []string{"TransientTransactionError"}}, Unanswered, false},
		{"command LockTimeout", mongo.CommandError{Code: 24, Name: "LockTimeout"}, Unanswered, false},
		{"command LockBusy", mongo.CommandError{Code: 46, Name: "LockBusy"}, Unanswered, false},
		{"command WriteConflict labelled RetryableWriteError", mongo.CommandError{Code: 112, Labels: []string{"RetryableWriteError"}}, Unanswered, false},
	} {
		assert.Equal(t, tc.want, Classify(tc.err), "%s: Classify", tc.name)
		assert.Equal(t, tc.rolledBack, IsRolledBack(tc.err), "%s: IsRolledBack", tc.name)
		if tc.err == nil {
			continue
		}
		got := WriteFailure("commit", "x", tc.err)
		assert.NotErrorIs(t, got, execstore.ErrInvalid, tc.name)
		if !tc.rolledBack {
			assert.NotErrorIs(t, got, execstore.ErrRolledBack, tc.name)
			assert.Equal(t, tc.want == Unanswered || tc.want == NotDurable, errors.Is(got, execstore.ErrOutcomeUnknown),
				"%s: unknown only when the answer proves nothing or is not durable", tc.name)
			continue
		}
		assert.ErrorIs(t, got, execstore.ErrRolledBack, tc.name)
		assert.NotErrorIs(t, got, execstore.ErrOutcomeUnknown, tc.name)
		var se, want mongo.ServerError
		require.True(t, errors.As(tc.err, &want), tc.name)
		if assert.True(t, errors.As(got, &se), "%s: unwraps to the driver's error", tc.name) {
			assert.Equal(t, want.ErrorCodes(), se.ErrorCodes(), tc.name)
		}
		assert.Contains(t, got.Error(), `commit of execution "x"`, tc.name)
	}
}
