package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// The first save of a version-0 execution creates it at version 1, in memory and stored.
func firstSave(t *testing.T, s execstore.Store) {
	e := newExe("e1")
	require.NoError(t, s.Save(bg, e))
	assert.EqualValues(t, 1, e.Version)
	got, err := s.Load(bg, "e1")
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.EqualValues(t, 1, got.Version)
	assert.Equal(t, "def", got.DefinitionID)
	assert.Equal(t, execstore.Running, got.Status)
	assert.Equal(t, "", got.ParentID)
}

// Sequential saves increment the version by one each.
func sequentialSaves(t *testing.T, s execstore.Store) {
	e := newExe("e1")
	for i := 1; i <= 5; i++ {
		e.Data = []byte(fmt.Sprintf(`{"n":%d}`, i))
		require.NoError(t, s.Save(bg, e))
		assert.EqualValues(t, i, e.Version)
	}
	got, err := s.Load(bg, "e1")
	require.NoError(t, err)
	assert.EqualValues(t, 5, got.Version)
	assert.Equal(t, `{"n":5}`, string(got.Data))
}

// The snapshot comes back byte for byte, and so do the parent and status.
func snapshotRoundTrip(t *testing.T, s execstore.Store) {
	snapshots := [][]byte{
		[]byte(`{"nested":{"list":[1,2,{"x":"y"}],"map":{"a":{"b":null}}},"unicode":"ünïcødé 日本 🚀","dots":"a.b$c．d"}`),
		{0, 1, 2, 255, 254, 0},
		{},
	}
	for i, snap := range snapshots {
		want := append([]byte{}, snap...)
		e := newExe(fmt.Sprintf("e%d", i))
		e.Data = snap
		e.ParentID = "parent"
		e.Status = execstore.Suspended
		require.NoError(t, s.Save(bg, e))
		if len(snap) > 0 {
			snap[0] ^= 0xff // the store keeps no alias of the caller's bytes
		}
		got, err := s.Load(bg, e.ID)
		require.NoError(t, err)
		assert.Equal(t, want, got.Data)
		assert.Equal(t, "parent", got.ParentID)
		assert.Equal(t, execstore.Suspended, got.Status)
	}
}

func loadUnknown(t *testing.T, s execstore.Store) {
	got, err := s.Load(bg, "nope")
	require.NoError(t, err)
	assert.Nil(t, got)
}

// A stale write is a conflict with expected and found; the caller's version is unchanged and
// the store keeps the other copy.
func staleWrite(t *testing.T, s execstore.Store) {
	e := newExe("e1")
	require.NoError(t, s.Save(bg, e))
	other, err := s.Load(bg, "e1")
	require.NoError(t, err)
	other.Data = []byte(`"other"`)
	require.NoError(t, s.Save(bg, other))

	e.Data = []byte(`"mine"`)
	err = s.Save(bg, e)
	require.ErrorIs(t, err, execstore.ErrConflict)
	var ce *execstore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "e1", ce.ExecutionID)
	assert.EqualValues(t, 1, ce.Expected)
	assert.EqualValues(t, 2, ce.Found)
	assert.EqualValues(t, 1, e.Version)
	got, err := s.Load(bg, "e1")
	require.NoError(t, err)
	assert.Equal(t, `"other"`, string(got.Data))
	assert.EqualValues(t, 2, got.Version)
}

// A commit at version > 0 of an execution that does not exist is a conflict with found none.
func commitMissingDocument(t *testing.T, s execstore.Store) {
	e := newExe("ghost")
	e.Version = 3
	err := s.Save(bg, e)
	var ce *execstore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.EqualValues(t, 3, ce.Expected)
	assert.Equal(t, execstore.NoVersion, ce.Found)
	assert.EqualValues(t, 3, e.Version)
	got, err := s.Load(bg, "ghost")
	require.NoError(t, err)
	assert.Nil(t, got)
}

// A commit with an emit and a processed id, on an existing execution and on the create path:
// one pending entry, the mark, and an ack that empties the outbox (twice is a no-op).
func commitOutboxAndDedupe(t *testing.T, s execstore.Store) {
	for _, create := range []bool{false, true} {
		id := fmt.Sprintf("e-create-%v", create)
		e := newExe(id)
		if !create {
			require.NoError(t, s.Save(bg, e))
		}
		seqs, err := s.Commit(bg, e, execstore.Commit{
			Emits:            []execstore.Emit{{TargetID: "parent-1", Event: []byte(`{"id":"x"}`)}},
			ProcessedEventID: "evt-42",
		})
		require.NoError(t, err)
		require.Len(t, seqs, 1)
		pending, err := s.PendingOutbox(bg, 0)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, "parent-1", pending[0].TargetID)
		assert.Equal(t, id, pending[0].SourceID)
		assert.Equal(t, seqs[0], pending[0].Seq)
		assert.Equal(t, `{"id":"x"}`, string(pending[0].Event))
		assert.Equal(t, e.Version, pending[0].Version)

		hit, err := s.IsProcessed(bg, id, "evt-42")
		require.NoError(t, err)
		assert.True(t, hit)
		hit, err = s.IsProcessed(bg, id, "other")
		require.NoError(t, err)
		assert.False(t, hit)

		require.NoError(t, s.AckOutbox(bg, id, seqs[0]))
		pending, err = s.PendingOutbox(bg, 0)
		require.NoError(t, err)
		assert.Empty(t, pending)
		// Acking again, or acking an unknown seq, is a no-op.
		require.NoError(t, s.AckOutbox(bg, id, seqs[0]))
		require.NoError(t, s.AckOutbox(bg, id, 999999))
		require.NoError(t, s.AckOutbox(bg, "unknown", 1))
		got, err := s.Load(bg, id)
		require.NoError(t, err)
		assert.Equal(t, e.Version, got.Version, "an ack does not move the version")
	}
}

// Acks remove exactly the acked entry; seqs come back in emit order and increase.
func ackRemovesExactlyOne(t *testing.T, s execstore.Store) {
	e := newExe("e1")
	seqs, err := s.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{
		{TargetID: "a", Event: []byte("1")}, {TargetID: "b", Event: []byte("2")}, {Event: []byte("3")}}})
	require.NoError(t, err)
	require.Len(t, seqs, 3)
	assert.Less(t, seqs[0], seqs[1])
	assert.Less(t, seqs[1], seqs[2])
	require.NoError(t, s.AckOutbox(bg, "e1", seqs[1]))
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	assert.Equal(t, seqs[0], pending[0].Seq)
	assert.Equal(t, seqs[2], pending[1].Seq)
	assert.Equal(t, "", pending[1].TargetID)
}

// Commits a:E1, b:E2, a:E3 (no target) are relayed E1, E2, E3, the absent target absent, and
// a limit takes the oldest.
func outboxOrderAcrossExecutions(t *testing.T, s execstore.Store) {
	a, b := newExe("a"), newExe("b")
	_, err := s.Commit(bg, a, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("E1")}}})
	require.NoError(t, err)
	_, err = s.Commit(bg, b, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("E2")}}})
	require.NoError(t, err)
	_, err = s.Commit(bg, a, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("E3")}}})
	require.NoError(t, err)
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, 3)
	assert.Equal(t, []string{"E1", "E2", "E3"}, []string{string(pending[0].Event), string(pending[1].Event), string(pending[2].Event)})
	assert.Equal(t, "", pending[2].TargetID)

	limited, err := s.PendingOutbox(bg, 2)
	require.NoError(t, err)
	assert.Equal(t, pending[:2], limited)
}

// A commit that lost its version guard leaves nothing behind: no outbox entry, dedupe mark,
// timer, spawn intent or trace step.
func lostCommitLeaksNothing(t *testing.T, s execstore.Store) {
	e := newExe("e1")
	require.NoError(t, s.Save(bg, e))
	stale := *e
	require.NoError(t, s.Save(bg, e))
	_, err := s.Commit(bg, &stale, execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "x", Event: []byte("lost")}},
		ProcessedEventID: "evt-lost",
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T", at(1))},
		Spawns:           []execstore.Spawn{{ChildID: "c", RootPath: "F.A"}},
		Trace:            map[string]any{"step": "lost"},
	})
	require.ErrorIs(t, err, execstore.ErrConflict)
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	hit, err := s.IsProcessed(bg, "e1", "evt-lost")
	require.NoError(t, err)
	assert.False(t, hit)
	due, err := s.DueTimers(bg, at(10), 0)
	require.NoError(t, err)
	assert.Empty(t, due)
	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, spawns)
	trace, err := s.ReadTrace(bg, "e1")
	require.NoError(t, err)
	assert.Empty(t, trace)
}

// A spawn committed by e is pending with parent e and its context; the ack empties it.
func spawns(t *testing.T, s execstore.Store) {
	e := newExe("e1")
	require.NoError(t, s.Save(bg, e))
	_, err := s.Commit(bg, e, execstore.Commit{Spawns: []execstore.Spawn{
		{ChildID: "child-1", RootPath: "Fork.A", Context: map[string]any{"x": int64(1), "a.b": "dotted", "$k": []any{"v"}}}}})
	require.NoError(t, err)
	pending, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	sp := pending[0]
	assert.Equal(t, "e1", sp.ParentID)
	assert.Equal(t, "child-1", sp.ChildID)
	assert.Equal(t, "Fork.A", sp.RootPath)
	assert.Equal(t, map[string]any{"x": int64(1), "a.b": "dotted", "$k": []any{"v"}}, sp.Context)
	require.NoError(t, s.AckSpawn(bg, "e1", sp.Seq))
	pending, err = s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	require.NoError(t, s.AckSpawn(bg, "e1", sp.Seq), "acking twice is a no-op")
}

// Copies of one execution saved at the same version at once: exactly one winner every round;
// the losers get expected and found and keep their version.
func concurrentSavesOneWinner(t *testing.T, s execstore.Store) {
	const rounds, racers = 10, 12
	for r := range rounds {
		id := fmt.Sprintf("e%d", r)
		base := newExe(id)
		require.NoError(t, s.Save(bg, base))
		var wins, conflicts atomic.Int64
		var wg sync.WaitGroup
		copies := make([]*execstore.Execution, racers)
		for i := range racers {
			c := *base
			c.Data = []byte(fmt.Sprintf(`"copy %d"`, i))
			copies[i] = &c
			wg.Go(func() {
				err := s.Save(bg, copies[i])
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, execstore.ErrConflict):
					var ce *execstore.ConflictError
					if assert.ErrorAs(t, err, &ce) {
						assert.EqualValues(t, 1, ce.Expected)
						assert.EqualValues(t, 2, ce.Found)
					}
					assert.EqualValues(t, 1, copies[i].Version)
					conflicts.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d", r)
		require.EqualValues(t, racers-1, conflicts.Load(), "round %d", r)
		got, err := s.Load(bg, id)
		require.NoError(t, err)
		assert.EqualValues(t, 2, got.Version)
	}
}

// Racing creators of one id: exactly one wins, the others see found 1.
func concurrentCreatesOneWinner(t *testing.T, s execstore.Store) {
	const rounds, racers = 10, 12
	for r := range rounds {
		id := fmt.Sprintf("new%d", r)
		var wins atomic.Int64
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				_, err := s.Commit(bg, newExe(id), execstore.Commit{Emits: []execstore.Emit{{Event: []byte("x")}}})
				if err == nil {
					wins.Add(1)
					return
				}
				var ce *execstore.ConflictError
				if assert.ErrorAs(t, err, &ce) {
					assert.EqualValues(t, 0, ce.Expected)
					assert.EqualValues(t, 1, ce.Found)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d", r)
	}
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Len(t, pending, rounds)
}

// Commits racing at one version, each with an emit and a processed id: exactly one outbox
// entry per version, and each pending entry's event is processed by the same commit.
func concurrentCommitsOneOutboxEntry(t *testing.T, s execstore.Store) {
	e := newExe("e")
	require.NoError(t, s.Save(bg, e))
	const rounds, racers = 10, 8
	for r := range rounds {
		cur, err := s.Load(bg, "e")
		require.NoError(t, err)
		var wins, conflicts atomic.Int64
		var wg sync.WaitGroup
		for i := range racers {
			c := *cur
			wg.Go(func() {
				_, err := s.Commit(bg, &c, execstore.Commit{
					Emits:            []execstore.Emit{{TargetID: "t", Event: []byte(fmt.Sprintf("r%d-%d", r, i))}},
					ProcessedEventID: fmt.Sprintf("r%d-%d", r, i),
				})
				switch {
				case err == nil:
					wins.Add(1)
				case errors.Is(err, execstore.ErrConflict):
					conflicts.Add(1)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load())
		require.EqualValues(t, racers-1, conflicts.Load())
	}
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Len(t, pending, rounds)
	for _, p := range pending {
		hit, err := s.IsProcessed(bg, "e", string(p.Event))
		require.NoError(t, err)
		assert.True(t, hit, "outbox entry %s without its dedupe mark", p.Event)
	}
	got, err := s.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, rounds+1, got.Version)
}

// A relay acking while handlers commit never resurrects or loses an entry.
func relayAcksWhileCommitting(t *testing.T, s execstore.Store) {
	const execs, commits = 4, 15
	var wg sync.WaitGroup
	for x := range execs {
		wg.Go(func() {
			e := newExe(fmt.Sprintf("e%d", x))
			for i := range commits {
				_, err := s.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte(fmt.Sprintf("%d-%d", x, i))}}})
				assert.NoError(t, err)
			}
		})
	}
	delivered := map[string]int{}
	stop := make(chan struct{})
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		for {
			// Whether the committers were done is read before the scan, so an empty scan after
			// it means nothing is left.
			stopping := false
			select {
			case <-stop:
				stopping = true
			default:
			}
			pending, err := s.PendingOutbox(bg, 0)
			assert.NoError(t, err)
			for _, p := range pending {
				delivered[string(p.Event)]++
				assert.NoError(t, s.AckOutbox(bg, p.SourceID, p.Seq))
			}
			if stopping && len(pending) == 0 {
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-relayDone
	assert.Len(t, delivered, execs*commits)
	for ev, n := range delivered {
		assert.Equal(t, 1, n, "event %s delivered %d times", ev, n)
	}
}
