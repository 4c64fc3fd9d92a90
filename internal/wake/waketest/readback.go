package waketest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
)

// AssertReadBack checks that each of handed is what store's reads return for the commit it
// describes: its outbox entries as PendingOutbox returns them, its spawn intents as
// PendingSpawns does, and for each path, the timer its last op left, as DueTimers returns it
// (a cancel leaves none). Only due timers are read, so the commits' fire times must be past.
// The commits must be of different executions, or of one, each arming its own paths. Call
// it before anything acks their entries or fires their timers.
func AssertReadBack(t testing.TB, store execstore.Store, handed ...*wake.Committed) {
	t.Helper()
	ctx := context.Background()
	outbox, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	spawns, err := store.PendingSpawns(ctx, 0)
	require.NoError(t, err)
	due, err := store.DueTimers(ctx, time.Now(), 0)
	require.NoError(t, err)
	for _, c := range handed {
		require.NotNil(t, c, "no Committed was handed over")
		assertOneReadBack(t, c, outbox, spawns, due)
	}
}

// assertOneReadBack checks c against the store's reads.
func assertOneReadBack(t testing.TB, c *wake.Committed, outbox []execstore.OutboxEntry, spawns []execstore.SpawnEntry,
	due []execstore.DueTimer) {
	t.Helper()
	var wantOutbox []execstore.OutboxEntry
	for _, e := range outbox {
		if e.SourceID == c.ExecutionID && e.Version == c.Version {
			wantOutbox = append(wantOutbox, e)
		}
	}
	assert.Equal(t, wantOutbox, c.Outbox, "outbox of %s v%d", c.ExecutionID, c.Version)

	seqs := map[int64]bool{}
	for _, sp := range c.Spawns {
		seqs[sp.Seq] = true
	}
	var wantSpawns []execstore.SpawnEntry
	for _, sp := range spawns {
		if sp.ParentID == c.ExecutionID && seqs[sp.Seq] {
			wantSpawns = append(wantSpawns, sp)
		}
	}
	assert.Equal(t, wantSpawns, c.Spawns, "spawns of %s v%d", c.ExecutionID, c.Version)
	assert.Len(t, c.Spawns, len(seqs), "spawn seqs of %s v%d are distinct", c.ExecutionID, c.Version)

	last := map[string]execstore.TimerOp{}
	for _, op := range c.Timers {
		last[op.Path] = op
	}
	for _, d := range due {
		op, ok := last[d.Path]
		if d.ExecutionID != c.ExecutionID || !ok {
			continue // another execution's, or armed by an earlier commit
		}
		assert.False(t, op.Cancel, "timer %s of %s is cancelled by the commit, yet due", d.Path, c.ExecutionID)
		assert.Equal(t, d.FireAt, op.FireAt, "timer %s of %s", d.Path, c.ExecutionID)
		delete(last, d.Path)
	}
	for path, op := range last {
		assert.True(t, op.Cancel, "timer %s of %s handed over, but not due", path, c.ExecutionID)
		assert.True(t, op.FireAt.IsZero(), "a cancel carries no fire time")
	}
}
