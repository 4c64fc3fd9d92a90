package counters

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

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
