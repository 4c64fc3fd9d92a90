package counters

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/server"
)

type gauges struct{ queued, inFlight int }

func (g gauges) Len() int      { return g.queued }
func (g gauges) InFlight() int { return g.inFlight }

func TestRecordCountsEveryStoreAlike(t *testing.T) {
	o := New("load", "commit")
	o.Record(o.Kind("load"), nil)
	o.Record(o.Kind("commit"), nil)
	o.Record(o.Kind("commit"), fmt.Errorf("wrapped: %w", execstore.ErrOutcomeUnknown))
	o.Record(o.Kind("commit"), execstore.ErrOverloaded)
	o.Record(o.Kind("load"), context.Canceled)
	o.Commands.Add(7)

	assert.Equal(t, server.Stats{
		Queued: 2, InFlight: 3,
		Ops: map[string]server.OpStats{
			"load":   {Calls: 2, Errors: 1},
			"commit": {Calls: 3, Errors: 2},
		},
		OutcomeUnknown: 1, Overloaded: 1, ServerCommands: 7,
	}, o.Stats(gauges{queued: 2, inFlight: 3}))
}

func TestKindOfUnknownNamePanics(t *testing.T) {
	o := New("load")
	assert.PanicsWithValue(t, "counters: no operation named commit", func() { o.Kind("commit") })
	assert.NotPanics(t, func() { o.Record(0, errors.New("x")) })
}

// With a logger, an unknown outcome is logged as a warning naming the store, the operation
// and the cause; nothing else is.
func TestUnknownOutcomeIsLogged(t *testing.T) {
	var buf bytes.Buffer
	o := New("load", "commit")
	o.Log(slog.New(slog.NewJSONHandler(&buf, nil)), "aio")
	o.Record(o.Kind("commit"), nil)
	o.Record(o.Kind("load"), context.Canceled)
	assert.Empty(t, buf.String(), "only unknown outcomes are logged")
	o.Record(o.Kind("commit"), &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: "e", Err: context.DeadlineExceeded})
	var rec map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &rec))
	assert.Equal(t, "WARN", rec["level"])
	assert.Equal(t, "aio", rec["store"])
	assert.Equal(t, "commit", rec["op"])
	assert.Contains(t, rec["err"], `commit of "e": outcome unknown`)
}
