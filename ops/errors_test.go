package ops

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
)

// MongoDB's refusal of a document past 16 MiB is a definite failure reported as ErrInvalid.
func TestWriteFailureTooLarge(t *testing.T) {
	for _, code := range []int{17419, 10334} {
		err := writeFailure("commit", "x", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: code, Message: "too large"}}})
		assert.ErrorIs(t, err, execstore.ErrInvalid, "code %d", code)
		assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown)
	}
}

func TestWriteFailureClassification(t *testing.T) {
	assert.ErrorIs(t, writeFailure("commit", "x", context.DeadlineExceeded), execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, writeFailure("commit", "x", context.DeadlineExceeded), context.DeadlineExceeded)
	assert.ErrorIs(t, writeFailure("commit", "x", errors.New("connection reset")), execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, writeFailure("commit", "x", mongo.WriteException{WriteConcernError: &mongo.WriteConcernError{Code: 64}}),
		execstore.ErrOutcomeUnknown, "a write-concern error: applied on the primary, maybe not durably")
	refused := writeFailure("commit", "x", mongo.WriteException{WriteErrors: []mongo.WriteError{{Code: 2, Message: "bad value"}}})
	assert.NotErrorIs(t, refused, execstore.ErrOutcomeUnknown)
	assert.NotErrorIs(t, refused, execstore.ErrInvalid)
	assert.NotErrorIs(t, writeFailure("commit", "x", mongo.CommandError{Code: 13, Message: "unauthorized"}), execstore.ErrOutcomeUnknown,
		"the server refused the command: nothing was applied")
	assert.ErrorIs(t, writeFailure("commit", "x", mongo.CommandError{Code: 6, Labels: []string{"NetworkError"}}), execstore.ErrOutcomeUnknown)
}
