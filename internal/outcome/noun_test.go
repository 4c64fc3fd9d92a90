package outcome

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
)

// Every error of a write or a read names what it was about with its noun: an execution by
// default, an idempotency key or a journal invocation when the store says so. The noun
// changes the text only: what the error matches and unwraps to stays the same.
func TestFailuresNameTheirSubject(t *testing.T) {
	refused := mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 2, Message: "bad value"}}}
	deadlock := mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 16908292, Message: "deadlock detected"}}}
	lost := mongo.CommandError{Code: 6, Labels: []string{"NetworkError"}}
	for _, tc := range []struct {
		noun, named string // named: how the texts name the id "k"
		unknownOf   string // how the outcome-unknown text names it
		readOf      string // how the read-failure text names it
	}{
		{"", `execution "k"`, `"k"`, `"k"`},
		{NounIdempotencyKey, `idempotency key "k"`, `idempotency key "k"`, `idempotency key "k"`},
		{NounInvocation, `journal invocation "k"`, `journal invocation "k"`, `journal invocation "k"`},
	} {
		err := WriteFailureOf(tc.noun, "claim", "k", refused)
		assert.Equal(t, "execstore: claim of "+tc.named+" refused by the server: "+refused.Error(), err.Error())
		assert.ErrorAs(t, err, new(mongo.WriteException))
		assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown)

		err = WriteFailureOf(tc.noun, "claim", "k", deadlock)
		assert.Contains(t, err.Error(), "execstore: claim of "+tc.named+" rolled back by the server for a lock conflict")
		assert.ErrorIs(t, err, execstore.ErrRolledBack)

		err = WriteFailureOf(tc.noun, "claim", "k", lost)
		assert.Equal(t, "execstore: claim of "+tc.unknownOf+": outcome unknown (read it back before retrying): "+lost.Error(), err.Error())
		var unknown *execstore.OutcomeUnknownError
		require.ErrorAs(t, err, &unknown)
		assert.Equal(t, "k", unknown.ExecutionID)
		assert.Equal(t, tc.noun, unknown.Noun)
		assert.ErrorIs(t, err, execstore.ErrOutcomeUnknown)

		err = ReadFailureOf(tc.noun, "read", "k", lost)
		assert.Equal(t, "execstore: read of "+tc.readOf+": "+lost.Error(), err.Error())
		assert.ErrorAs(t, err, new(mongo.CommandError))
		assert.Same(t, context.Canceled, ReadFailureOf(tc.noun, "read", "k", context.Canceled), "a context error as is")

		if tc.noun != "" {
			for _, e := range []error{WriteFailureOf(tc.noun, "claim", "k", refused), WriteFailureOf(tc.noun, "claim", "k", deadlock),
				WriteFailureOf(tc.noun, "claim", "k", lost), ReadFailureOf(tc.noun, "read", "k", lost)} {
				assert.NotContains(t, e.Error(), "execution", "a %s is not an execution", tc.noun)
			}
		}
	}
	assert.Equal(t, WriteFailure("commit", "x", lost).Error(), WriteFailureOf("", "commit", "x", lost).Error())
	assert.Equal(t, ReadFailure("load", "x", lost).Error(), ReadFailureOf("", "load", "x", lost).Error())
	assert.True(t, errors.Is(WriteFailure("commit", "x", lost), execstore.ErrOutcomeUnknown))
}
