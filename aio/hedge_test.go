package aio_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/server"
)

// The reads of a wake-up are hedged: when one command stalls on its connection (held by the
// proxy until the test ends), the same read sent again on another answers the caller, and
// Stats.Hedged counts it. Without the hedge each call below would wait for its context.
func TestWakeReadsHedged(t *testing.T) {
	proxy, uri := proxied(t)
	h := newHarness(t, aio.Options{})
	s, err := aio.Open(bg, uri, aio.Options{Connection: server.Connection{Database: h.opts.Database}})
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(bg, answeredWithin)
		defer cancel()
		assert.NoError(t, s.Close(ctx))
	})
	exe := newExe("hedge-a")
	_, err = s.Commit(bg, exe, execstore.Commit{
		Emits:  []execstore.Emit{{TargetID: "t", Event: []byte("e")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", time.Unix(1000, 0))},
	})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(bg, answeredWithin)
	defer cancel()

	proxy.StallRequestWith([]byte("hedge-a"))
	entries, err := s.PendingOutboxOf(ctx, []string{"hedge-a"}, 0)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	assert.Equal(t, "hedge-a", entries[0].SourceID)
	assert.EqualValues(t, 1, s.Stats().Hedged)

	proxy.StallRequestWith([]byte("hedge-a"))
	due, err := s.DueTimersOf(ctx, []string{"hedge-a"}, time.Unix(2000, 0), 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Equal(t, "p", due[0].Path)
	assert.EqualValues(t, 2, s.Stats().Hedged)

	board := wake.BoardOf(s)
	require.NotNil(t, board)
	require.NoError(t, board.Publish(ctx, "hedge-holder", wake.Holding{Kind: wake.Timers, Parts: []int{0}}))
	proxy.StallRequestWith([]byte("hedge-holder"))
	marks, err := board.Marks(ctx, "hedge-holder")
	require.NoError(t, err)
	assert.Empty(t, marks)
	assert.EqualValues(t, 3, s.Stats().Hedged)
	require.NoError(t, board.Withdraw(ctx, "hedge-holder"))
}
