package ops

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
)

// Server error codes that mean a document would outgrow MongoDB's size limit.
const (
	codeObjectTooLarge   = 10334
	codeDocumentTooLarge = 17419
	codeDocTooLargeOld   = 17420
)

// writeFailure classifies the error of a write that was handed to the driver. A definite
// refusal from the server (a write error, a command error the server itself returned) means
// nothing was applied; anything else (a network error, a timeout, the caller's context
// ending, a write-concern error) may or may not have been applied and becomes an
// *execstore.OutcomeUnknownError.
func writeFailure(op, id string, err error) error {
	if definite, cause := isDefiniteRefusal(err); definite {
		if isTooLarge(err) {
			return &execstore.InvalidError{Field: "document",
				Reason: fmt.Sprintf("would exceed MongoDB's %d-byte document limit: %v", execstore.MaxDocumentBytes, cause)}
		}
		return fmt.Errorf("execstore: %s of execution %q refused by the server: %w", op, id, cause)
	}
	return &execstore.OutcomeUnknownError{Op: op, ExecutionID: id, Err: err}
}

func isDefiniteRefusal(err error) (bool, error) {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		mongo.IsTimeout(err) || mongo.IsNetworkError(err) {
		return false, err
	}
	var we mongo.WriteException
	if errors.As(err, &we) {
		return we.WriteConcernError == nil && len(we.WriteErrors) > 0, err
	}
	var ce mongo.CommandError
	if errors.As(err, &ce) {
		return !ce.HasErrorLabel("NetworkError") && !ce.HasErrorLabel("RetryableWriteError"), err
	}
	return false, err
}

func isTooLarge(err error) bool {
	var se mongo.ServerError
	if !errors.As(err, &se) {
		return false
	}
	return se.HasErrorCode(codeObjectTooLarge) || se.HasErrorCode(codeDocumentTooLarge) ||
		se.HasErrorCode(codeDocTooLargeOld)
}

// readFailure wraps the error of a read; a context error is returned as is so that callers can
// compare it with ctx.Err().
func readFailure(op, id string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("execstore: %s of %q: %w", op, id, err)
}
