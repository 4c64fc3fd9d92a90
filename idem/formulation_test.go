package idem

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
)

// A write whose reply carries a write-concern error ran on the primary and may be rolled
// back: it is execstore.ErrOutcomeUnknown and never settled by reading the token back (a
// read would find the write and report it held or stored). Codes: 64 WriteConcernFailed
// (wtimeout), 100 UnsatisfiableWriteConcern, 91 ShutdownInProgress.
func TestWriteConcernErrorIsNeverSettled(t *testing.T) {
	wce := func(code int) *mongo.WriteConcernError {
		return &mongo.WriteConcernError{Code: code, Message: fmt.Sprintf("write concern error %d", code)}
	}
	type failure struct {
		name    string
		err     error
		unknown bool
		settle  bool
	}
	cases := []failure{
		{"network error", mongo.CommandError{Code: 6, Labels: []string{"NetworkError"}}, true, true},
		{"deadline", context.DeadlineExceeded, true, true},
		{"duplicate key", mongo.WriteException{WriteErrors: mongo.WriteErrors{{Code: 11000}}}, false, false},
	}
	for _, code := range []int{64, 100, 91} {
		cases = append(cases,
			failure{fmt.Sprintf("write concern %d", code), mongo.WriteException{WriteConcernError: wce(code)}, true, false},
			failure{fmt.Sprintf("write concern %d with a write error", code), mongo.WriteException{
				WriteConcernError: wce(code), WriteErrors: mongo.WriteErrors{{Code: 11000}}}, true, false},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err, settle := writeFailure(context.Background(), "claim", "k", c.err)
			assert.Equal(t, c.unknown, errors.Is(err, execstore.ErrOutcomeUnknown), "%v", err)
			assert.Equal(t, c.settle, settle)
			assert.Contains(t, err.Error(), `claim of idempotency key "k"`, "the error names the key")
			assert.NotContains(t, err.Error(), "execution")
			if c.unknown {
				var unknown *execstore.OutcomeUnknownError
				require.ErrorAs(t, err, &unknown)
				assert.Equal(t, "k", unknown.ExecutionID)
				assert.Equal(t, "idempotency key", unknown.Noun)
			}
		})
	}
	// A caller's context that has ended settles nothing either.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, settle := writeFailure(ctx, "claim", "k", context.Canceled)
	assert.False(t, settle)
}

// Leases are rounded up to whole milliseconds on both formulations: the MongoDB pipeline adds
// leaseMillis(d) to $$NOW, and the FerretDB formulation adds the same to the latest the
// server's clock can read.
func TestLeaseRoundingIsShared(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int64
	}{{1500 * time.Millisecond, 1500}, {1500*time.Millisecond + time.Nanosecond, 1501}, {time.Microsecond, 1}, {0, 0}} {
		assert.Equal(t, c.want, leaseMillis(c.d), "%v", c.d)
		assert.Equal(t, bson.A{"$$NOW", c.want}, afterNow(c.d)[0].Value, "%v", c.d)
	}
	now := time.UnixMilli(1_700_000_000_000)
	assert.Equal(t, now.Add(1501*time.Millisecond).UTC(), until(now, 0, 1500*time.Millisecond+time.Nanosecond))
	assert.Equal(t, now.Add(1500*time.Millisecond).UTC(), until(now, 0, 1500*time.Millisecond), "an exact start is not moved")
	assert.Equal(t, now.Add(1502*time.Millisecond).UTC(), until(now.Add(300*time.Microsecond), time.Millisecond, 1500*time.Millisecond),
		"the start is rounded up to the millisecond")
}
