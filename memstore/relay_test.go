package memstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
)

// 5. and 6. A commit with an emit and a processed id, on an existing execution and on the
// create path; acking empties the outbox; acking again or an unknown seq is a no-op.
func TestCommitOutboxAndDedupe(t *testing.T) {
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("create=%v", create), func(t *testing.T) {
			s := memstore.New(memstore.Options{})
			e := newExe("e1")
			if !create {
				require.NoError(t, s.Save(bg, e))
			}
			seqs := mustCommit(t, s, e, execstore.Commit{
				Emits:            []execstore.Emit{{TargetID: "parent-1", Event: []byte(`{"id":"x"}`)}},
				ProcessedEventID: "evt-42",
			})
			require.Len(t, seqs, 1)
			pending, err := s.PendingOutbox(bg, 0)
			require.NoError(t, err)
			require.Len(t, pending, 1)
			assert.Equal(t, []execstore.OutboxEntry{{Seq: seqs[0], SourceID: "e1", Version: e.Version,
				TargetID: "parent-1", Event: []byte(`{"id":"x"}`), CommittedAt: pending[0].CommittedAt}}, pending)

			for event, want := range map[string]bool{"evt-42": true, "other": false} {
				hit, err := s.IsProcessed(bg, "e1", event)
				require.NoError(t, err)
				assert.Equal(t, want, hit, event)
			}

			require.NoError(t, s.AckOutbox(bg, "e1", seqs[0]))
			pending, err = s.PendingOutbox(bg, 0)
			require.NoError(t, err)
			assert.Empty(t, pending)
			require.NoError(t, s.AckOutbox(bg, "e1", seqs[0]))
			require.NoError(t, s.AckOutbox(bg, "e1", 999999))
			require.NoError(t, s.AckOutbox(bg, "unknown", 1))
			require.NoError(t, s.AckOutbox(bg, "e1", -1))
			got, err := s.Load(bg, "e1")
			require.NoError(t, err)
			assert.Equal(t, e.Version, got.Version, "an ack moved the version")
		})
	}
}

// An ack removes exactly the acked entry, and only when the named source wrote it.
func TestAckRemovesExactlyOne(t *testing.T) {
	s := memstore.New(memstore.Options{})
	a, b := newExe("a"), newExe("b")
	seqs := mustCommit(t, s, a, execstore.Commit{Emits: []execstore.Emit{
		{TargetID: "x", Event: []byte("1")}, {TargetID: "y", Event: []byte("2")}, {Event: []byte("3")}}})
	other := mustCommit(t, s, b, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("4")}}})
	require.NoError(t, s.AckOutbox(bg, "b", seqs[1]), "b did not write it")
	require.NoError(t, s.AckOutbox(bg, "a", seqs[1]))
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, 3)
	assert.Equal(t, []int64{seqs[0], seqs[2], other[0]}, []int64{pending[0].Seq, pending[1].Seq, pending[2].Seq})
	assert.Equal(t, "", pending[1].TargetID)
}

// 7. Outbox order across executions: oldest seq first, each source's entries in commit
// order; an absent target survives as absent; a limit returns the oldest.
func TestOutboxOrderAcrossExecutions(t *testing.T) {
	s := memstore.New(memstore.Options{})
	a, b := newExe("a"), newExe("b")
	mustCommit(t, s, a, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("E1")}}})
	mustCommit(t, s, b, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("E2")}}})
	mustCommit(t, s, a, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("E3")}}})
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, 3)
	assert.Equal(t, []string{"E1", "E2", "E3"}, []string{string(pending[0].Event), string(pending[1].Event), string(pending[2].Event)})
	assert.Equal(t, []int64{1, 1, 2}, []int64{pending[0].Version, pending[1].Version, pending[2].Version})
	assert.Equal(t, "", pending[2].TargetID)
	for _, limit := range []int{1, 2, 3, 4} {
		limited, err := s.PendingOutbox(bg, limit)
		require.NoError(t, err)
		assert.Equal(t, pending[:min(limit, 3)], limited, "limit %d", limit)
	}
}

// Outbox and spawn seqs are unique and increasing, each from a counter of its own, across
// executions and commits.
func TestSeqsUniqueAndIncreasing(t *testing.T) {
	s := memstore.New(memstore.Options{})
	var last int64
	for i := range 20 {
		e := newExe(fmt.Sprintf("e%d", i%3))
		if loaded, err := s.Load(bg, e.ID); err == nil && loaded != nil {
			e = loaded
		}
		seqs := mustCommit(t, s, e, execstore.Commit{
			Emits:  []execstore.Emit{{Event: []byte("a")}, {Event: []byte("b")}},
			Spawns: []execstore.Spawn{{ChildID: "c"}},
		})
		for _, seq := range seqs {
			assert.Greater(t, seq, last)
			last = seq
		}
	}
	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	require.Len(t, spawns, 20)
	for i, sp := range spawns {
		assert.EqualValues(t, i+1, sp.Seq, "spawn seqs have a counter of their own")
		assert.Equal(t, fmt.Sprintf("e%d", i%3), sp.ParentID)
	}
}

// 9. A spawn committed by e: one pending spawn with parent e and its context; ack empties it.
func TestSpawns(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e1")
	require.NoError(t, s.Save(bg, e))
	mustCommit(t, s, e, execstore.Commit{Spawns: []execstore.Spawn{
		{ChildID: "child-1", RootPath: "Fork.A", Context: map[string]any{"x": int64(1), "a.b": "dotted", "$k": []any{"v"}}}}})
	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	require.Len(t, spawns, 1)
	sp := spawns[0]
	assert.Equal(t, execstore.SpawnEntry{Seq: sp.Seq, ParentID: "e1", ChildID: "child-1", RootPath: "Fork.A",
		Context: map[string]any{"x": int64(1), "a.b": "dotted", "$k": []any{"v"}}, CommittedAt: sp.CommittedAt}, sp)
	require.NoError(t, s.AckSpawn(bg, "other", sp.Seq))
	spawns, err = s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Len(t, spawns, 1, "an ack naming another parent removed the spawn")
	require.NoError(t, s.AckSpawn(bg, "e1", sp.Seq))
	spawns, err = s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, spawns)
	require.NoError(t, s.AckSpawn(bg, "e1", sp.Seq))
}

// Spawns come oldest first, and a limit returns the oldest.
func TestPendingSpawnsOrderAndLimit(t *testing.T) {
	s := memstore.New(memstore.Options{})
	a, b := newExe("a"), newExe("b")
	mustCommit(t, s, b, execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "1"}, {ChildID: "2"}}})
	mustCommit(t, s, a, execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "3"}}})
	mustCommit(t, s, b, execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "4"}}})
	all, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	var children []string
	for _, sp := range all {
		children = append(children, sp.ChildID)
	}
	assert.Equal(t, []string{"1", "2", "3", "4"}, children)
	two, err := s.PendingSpawns(bg, 2)
	require.NoError(t, err)
	assert.Equal(t, all[:2], two)
}
