package storetest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// entriesRecordTheirCommit: an outbox entry and a spawn intent record when their commit was
// made, in UTC to the millisecond, between the call's start and its return (one process,
// one clock); a later commit's entries record a time no earlier, and the earlier entries keep
// theirs.
func entriesRecordTheirCommit(t *testing.T, s execstore.Store) {
	exe := newExe("committed-at")
	before := time.Now().Truncate(time.Millisecond)
	mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("one")}},
		Spawns: []execstore.Spawn{{ChildID: "committed-at-child"}}})
	after := time.Now()
	out, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, out, 1)
	first := out[0].CommittedAt
	assert.Equal(t, time.UTC, first.Location(), "committed at %s", first)
	assert.Equal(t, first.Truncate(time.Millisecond), first, "not whole milliseconds")
	assert.False(t, first.Before(before) || first.After(after), "entry committed at %s, the call ran from %s to %s",
		first, before, after)
	sp, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	require.Len(t, sp, 1)
	assert.True(t, sp[0].CommittedAt.Equal(first), "the intent's %s, its commit's entry's %s", sp[0].CommittedAt, first)

	time.Sleep(2 * time.Millisecond)
	mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("two")}}})
	out, err = s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.True(t, out[0].CommittedAt.Equal(first), "the first entry's time changed: %s, was %s", out[0].CommittedAt, first)
	assert.True(t, out[1].CommittedAt.After(first), "the later commit's entry at %s, the first at %s", out[1].CommittedAt, first)
}

// withoutCommitTimes returns entries with their CommittedAt zeroed, for comparisons of what
// else they hold.
func withoutCommitTimes(entries []execstore.OutboxEntry) []execstore.OutboxEntry {
	out := make([]execstore.OutboxEntry, len(entries))
	for i, e := range entries {
		e.CommittedAt = time.Time{}
		out[i] = e
	}
	return out
}
