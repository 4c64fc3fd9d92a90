package outcome

import (
	"fmt"
	"strings"

	"github.com/execstore/execstore"
)

// A statement the server gave up for a lock conflict — a deadlock, a lock it could not get in
// time, a serialization failure, a write conflict — was rolled back: nothing of it was
// applied. Where the server says so per statement, as a write error, that is a definite
// answer (Classify's WriteErrors), and the statement is safe to send again as is. A
// command-level error saying the same (not attached to a statement) proves nothing about the
// command's other statements, some of which may have been applied before it: it stays
// Unanswered, like any command error whose code is not among refusedCodes, and so does one
// carrying a NetworkError or RetryableWriteError label.
//
// MongoDB retries write conflicts inside the server and reports what it gives up as
// WriteConflict, LockTimeout or LockBusy. The servers that keep documents in PostgreSQL rows
// (FerretDB 2.x and the DocumentDB extension it runs on, Azure Cosmos DB for MongoDB vCore)
// take a row lock per statement, each statement of a bulk in a subtransaction of its own, and
// report a statement PostgreSQL aborted as a write error carrying PostgreSQL's message and,
// for an error with no MongoDB code of its own, PostgreSQL's SQLSTATE packed into an integer
// as PostgreSQL packs it (DocumentDB's behaviour; FerretDB 2.x passes write-error codes it
// does not map on unchanged): "deadlock detected" is 16908292 (40P01). DocumentDB reports a
// deadlock as a command error instead only when its documentdb.throwDeadlockOnCRUD setting is
// on (off by default).

// MongoDB's codes for a statement given up for a lock conflict.
const (
	codeLockTimeout   = 24
	codeLockBusy      = 46
	codeWriteConflict = 112
)

// codeInternalError is the code FerretDB gives a PostgreSQL error it has no MongoDB code for.
const codeInternalError = 1

// rolledBackCodes are the write-error codes that by themselves say the statement was rolled
// back for a lock conflict.
var rolledBackCodes = map[int]bool{
	codeLockTimeout:   true,
	codeLockBusy:      true,
	codeWriteConflict: true,
	sqlState("40P01"): true, // deadlock_detected: "deadlock detected"
	sqlState("55P03"): true, // lock_not_available: "canceling statement due to lock timeout", "could not obtain lock on row …"
	sqlState("40001"): true, // serialization_failure: "could not serialize access due to concurrent update"
}

// rolledBackMessages are PostgreSQL's messages for a statement rolled back for a lock
// conflict. They are trusted only with codeInternalError: a front that has no code for the
// error may still pass its message on.
var rolledBackMessages = []string{
	"deadlock detected",
	"canceling statement due to lock timeout",
	"could not obtain lock",
	"could not serialize access",
}

// sqlState is the integer PostgreSQL makes of a five-character SQLSTATE (its MAKE_SQLSTATE:
// six bits a character, the first character lowest), the code DocumentDB reports it as.
func sqlState(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0; i-- {
		n = n<<6 | int((s[i]-'0')&0x3f)
	}
	return n
}

// rolledBack reports whether a write error of code and message says its statement was
// rolled back for a lock conflict.
func rolledBack(code int, message string) bool {
	if rolledBackCodes[code] {
		return true
	}
	if code != codeInternalError {
		return false
	}
	for _, m := range rolledBackMessages {
		if strings.Contains(message, m) {
			return true
		}
	}
	return false
}

// IsRolledBack reports whether err is the server's answer to a write command that every
// statement it failed was rolled back for a lock conflict: the server answered (Classify says
// WriteErrors: a write or bulk write exception with write errors, no write-concern error and
// no NetworkError or RetryableWriteError label) and each of its write errors is a deadlock, a
// lock timeout, a serialization failure or a write conflict. Those statements were not
// applied and are safe to send again as is; the others of a bulk were applied, as its counts
// say. A command error is never a rollback here, whatever its message: the outcome of the
// command's statements is unknown.
func IsRolledBack(err error) bool {
	if Classify(err) != WriteErrors {
		return false
	}
	for _, se := range writeErrorsOf(err) {
		if !rolledBack(se.code, se.message) {
			return false
		}
	}
	return true
}

// rolledBackError is a single write the server rolled back for a lock conflict. It matches
// execstore.ErrRolledBack and unwraps to the driver's error.
type rolledBackError struct {
	op, noun, id string // noun names what id is; empty for an execution
	err          error
}

func (e *rolledBackError) Error() string {
	return fmt.Sprintf("execstore: %s of %s rolled back by the server for a lock conflict; nothing was written, and it is safe to send again: %v",
		e.op, subject(e.noun, e.id), e.err)
}

// Is makes errors.Is(err, execstore.ErrRolledBack) true.
func (e *rolledBackError) Is(target error) bool { return target == execstore.ErrRolledBack }

// Unwrap returns the driver's error.
func (e *rolledBackError) Unwrap() error { return e.err }
