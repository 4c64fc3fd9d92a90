package memstore_test

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
)

// 1. First save of a version-0 execution: version 1 in memory and in the store.
func TestFirstSave(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e1")
	e.ParentID = "p"
	require.NoError(t, s.Save(bg, e))
	assert.EqualValues(t, 1, e.Version)
	got, err := s.Load(bg, "e1")
	require.NoError(t, err)
	assert.Equal(t, &execstore.Execution{ID: "e1", DefinitionID: "def", Status: execstore.Running, ParentID: "p",
		Version: 1, Data: []byte(`{"n":0}`)}, got)
}

// 2. Sequential saves increment the version by one each, and each replaces the snapshot and
// the top-level fields.
func TestSequentialSaves(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e1")
	statuses := execstore.Statuses()
	for i := 1; i <= 7; i++ {
		e.Data = []byte(fmt.Sprintf(`{"n":%d}`, i))
		e.Status = statuses[i-1]
		e.DefinitionID = fmt.Sprintf("def%d", i)
		require.NoError(t, s.Save(bg, e))
		assert.EqualValues(t, i, e.Version)
		got, err := s.Load(bg, "e1")
		require.NoError(t, err)
		assert.Equal(t, e, got)
	}
}

// 3. The snapshot round-trips byte for byte; an empty or nil one comes back empty, not nil.
func TestSnapshotRoundTrip(t *testing.T) {
	s := memstore.New(memstore.Options{})
	snapshots := [][]byte{
		[]byte(`{"nested":{"list":[1,2,{"x":"y"}],"map":{"a":{"b":null}}},"unicode":"ünïcødé 日本 🚀","dots":"a.b$c．d"}`),
		{0, 1, 2, 255, 254, 0},
		{},
		nil,
	}
	for i, snap := range snapshots {
		e := newExe(fmt.Sprintf("e%d", i))
		e.Data = snap
		require.NoError(t, s.Save(bg, e))
		got, err := s.Load(bg, e.ID)
		require.NoError(t, err)
		require.NotNil(t, got.Data)
		assert.Equal(t, string(snap), string(got.Data))
	}
}

func TestLoadUnknown(t *testing.T) {
	s := memstore.New(memstore.Options{})
	got, err := s.Load(bg, "nope")
	require.NoError(t, err)
	assert.Nil(t, got)
}

// 4. Stale write: a conflict with expected and found; the caller's execution is untouched;
// the store keeps the other copy.
func TestStaleWrite(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e1")
	require.NoError(t, s.Save(bg, e))
	other, err := s.Load(bg, "e1")
	require.NoError(t, err)
	other.Data = []byte(`"other"`)
	require.NoError(t, s.Save(bg, other))

	e.Data = []byte(`"mine"`)
	e.TraceNext = 7
	err = s.Save(bg, e)
	require.ErrorIs(t, err, execstore.ErrConflict)
	var ce *execstore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, execstore.ConflictError{ExecutionID: "e1", Expected: 1, Found: 2}, *ce)
	assert.EqualValues(t, 1, e.Version)
	assert.EqualValues(t, 7, e.TraceNext)
	got, err := s.Load(bg, "e1")
	require.NoError(t, err)
	assert.Equal(t, `"other"`, string(got.Data))
	assert.EqualValues(t, 2, got.Version)
}

// Every way a version guard fails: a conflict, nothing written.
func TestConflicts(t *testing.T) {
	s := memstore.New(memstore.Options{})
	require.NoError(t, s.Save(bg, newExe("v1")))
	for _, c := range []struct {
		name              string
		id                string
		version, expected int64
		found             int64
	}{
		{"version > 0, no execution", "ghost", 3, 3, execstore.NoVersion},
		{"version 0, execution exists", "v1", 0, 0, 1},
		{"version ahead", "v1", 2, 2, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, s, "v1", "ghost")
			e := newExe(c.id)
			e.Version = c.version
			_, err := s.Commit(bg, e, everything(9))
			var ce *execstore.ConflictError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, execstore.ErrConflict)
			assert.Equal(t, execstore.ConflictError{ExecutionID: c.id, Expected: c.expected, Found: c.found}, *ce)
			assert.Equal(t, c.version, e.Version)
			assert.Equal(t, before, snapshot(t, s, "v1", "ghost"))
			hit, err := s.IsProcessed(bg, c.id, "p9")
			require.NoError(t, err)
			assert.False(t, hit)
		})
	}
}

// A commit writes every part at once, advances the caller's version and trace index, and
// returns the outbox seqs in emit order.
func TestCommitWritesEverything(t *testing.T) {
	for _, create := range []bool{true, false} {
		t.Run(fmt.Sprintf("create=%v", create), func(t *testing.T) {
			s := memstore.New(memstore.Options{})
			e := newExe("e")
			if !create {
				require.NoError(t, s.Save(bg, e))
			}
			version := e.Version
			seqs := mustCommit(t, s, e, execstore.Commit{
				Emits: []execstore.Emit{{TargetID: "a", Event: []byte("1")}, {Event: []byte("2")},
					{TargetID: "c", Event: nil}},
				ProcessedEventID: "p",
				Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T", 5), execstore.ScheduleTimer("U", 6)},
				Spawns:           []execstore.Spawn{{ChildID: "c1", RootPath: "F.A"}, {ChildID: "c2"}},
				Trace:            map[string]any{"k": "v"},
			})
			assert.Equal(t, version+1, e.Version)
			assert.EqualValues(t, 1, e.TraceNext)
			require.Len(t, seqs, 3)
			assert.Less(t, seqs[0], seqs[1])
			assert.Less(t, seqs[1], seqs[2])

			pending, err := s.PendingOutbox(bg, 0)
			require.NoError(t, err)
			assert.Equal(t, []execstore.OutboxEntry{
				{Seq: seqs[0], SourceID: "e", Version: e.Version, TargetID: "a", Event: []byte("1")},
				{Seq: seqs[1], SourceID: "e", Version: e.Version, Event: []byte("2")},
				{Seq: seqs[2], SourceID: "e", Version: e.Version, TargetID: "c", Event: []byte{}},
			}, pending)
			spawns, err := s.PendingSpawns(bg, 0)
			require.NoError(t, err)
			require.Len(t, spawns, 2)
			assert.Equal(t, execstore.SpawnEntry{Seq: spawns[0].Seq, ParentID: "e", ChildID: "c1", RootPath: "F.A",
				Context: map[string]any{}}, spawns[0])
			assert.Equal(t, execstore.SpawnEntry{Seq: spawns[1].Seq, ParentID: "e", ChildID: "c2",
				Context: map[string]any{}}, spawns[1])
			assert.Less(t, spawns[0].Seq, spawns[1].Seq)
			hit, err := s.IsProcessed(bg, "e", "p")
			require.NoError(t, err)
			assert.True(t, hit)
			due, err := s.DueTimers(bg, 10, 0)
			require.NoError(t, err)
			assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "T", FireAt: 5}, {ExecutionID: "e", Path: "U", FireAt: 6}}, due)
			trace, err := s.ReadTrace(bg, "e")
			require.NoError(t, err)
			assert.Equal(t, []execstore.TraceStep{{Index: 0, Fields: map[string]any{"k": "v"}}}, trace)
			got, err := s.Load(bg, "e")
			require.NoError(t, err)
			assert.Equal(t, e, got)
		})
	}
}

// A commit without emits returns no seqs and takes none.
func TestCommitWithoutEmits(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	seqs := mustCommit(t, s, e, execstore.Commit{})
	assert.Empty(t, seqs)
	a := mustCommit(t, s, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("x")}}})
	assert.Equal(t, []int64{1}, a, "the first seq is 1")
}

// 8. A lost commit leaks nothing, and takes no seq.
func TestLostCommitLeaksNothing(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e1")
	require.NoError(t, s.Save(bg, e))
	stale := *e
	require.NoError(t, s.Save(bg, e))
	before := snapshot(t, s, "e1")
	_, err := s.Commit(bg, &stale, execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "x", Event: []byte("lost")}},
		ProcessedEventID: "evt-lost",
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T", 1)},
		Spawns:           []execstore.Spawn{{ChildID: "c", RootPath: "F.A"}},
		Trace:            map[string]any{"step": "lost"},
	})
	require.ErrorIs(t, err, execstore.ErrConflict)
	assert.Equal(t, before, snapshot(t, s, "e1"))
	assert.Empty(t, before.outbox)
	assert.Empty(t, before.traces["e1"])
	hit, err := s.IsProcessed(bg, "e1", "evt-lost")
	require.NoError(t, err)
	assert.False(t, hit)
	seqs := mustCommit(t, s, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("won")}}})
	assert.Equal(t, []int64{1}, seqs, "the lost commit took a seq")
}

// 14. Concurrent saves of copies at the same version: exactly one winner per version, every
// loser a conflict with its version unchanged.
func TestConcurrentSavesOneWinner(t *testing.T) {
	s := memstore.New(memstore.Options{})
	const rounds, racers = 50, 16
	base := newExe("e")
	require.NoError(t, s.Save(bg, base))
	for r := range rounds {
		cur, err := s.Load(bg, "e")
		require.NoError(t, err)
		var wins, conflicts atomic.Int64
		var wg sync.WaitGroup
		for i := range racers {
			c := *cur
			c.Data = []byte(fmt.Sprintf(`"round %d copy %d"`, r, i))
			wg.Go(func() {
				err := s.Save(bg, &c)
				switch {
				case err == nil:
					wins.Add(1)
					assert.Equal(t, cur.Version+1, c.Version)
				case errors.Is(err, execstore.ErrConflict):
					conflicts.Add(1)
					var ce *execstore.ConflictError
					if assert.ErrorAs(t, err, &ce) {
						assert.Equal(t, cur.Version, ce.Expected)
						assert.Equal(t, cur.Version+1, ce.Found)
					}
					assert.Equal(t, cur.Version, c.Version)
				default:
					t.Errorf("unexpected error: %v", err)
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d", r)
		require.EqualValues(t, racers-1, conflicts.Load(), "round %d", r)
	}
	got, err := s.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, rounds+1, got.Version)
}

// Racing creators: exactly one wins; the others see found = 1.
func TestConcurrentCreatesOneWinner(t *testing.T) {
	s := memstore.New(memstore.Options{})
	const rounds, racers = 30, 12
	for r := range rounds {
		id := fmt.Sprintf("new%d", r)
		var wins atomic.Int64
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				_, err := s.Commit(bg, newExe(id), execstore.Commit{Emits: []execstore.Emit{{Event: []byte(id)}}})
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

// 15. Concurrent commits with one emit each: exactly one conflict-free commit and one outbox
// entry per version, each with its own dedupe mark.
func TestConcurrentCommitsOneOutboxEntry(t *testing.T) {
	s := memstore.New(memstore.Options{})
	require.NoError(t, s.Save(bg, newExe("e")))
	const rounds, racers = 30, 8
	for r := range rounds {
		cur, err := s.Load(bg, "e")
		require.NoError(t, err)
		var wins, conflicts atomic.Int64
		var wg sync.WaitGroup
		for i := range racers {
			c := *cur
			wg.Go(func() {
				id := fmt.Sprintf("r%d-%d", r, i)
				_, err := s.Commit(bg, &c, execstore.Commit{
					Emits:            []execstore.Emit{{TargetID: "t", Event: []byte(id)}},
					ProcessedEventID: id,
				})
				if err == nil {
					wins.Add(1)
				} else if errors.Is(err, execstore.ErrConflict) {
					conflicts.Add(1)
				} else {
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
	require.Len(t, pending, rounds)
	for i, p := range pending {
		assert.EqualValues(t, i+2, p.Version)
		hit, err := s.IsProcessed(bg, "e", string(p.Event))
		require.NoError(t, err)
		assert.True(t, hit, "outbox entry %s without its dedupe mark", p.Event)
	}
	processed := 0
	for r := range rounds {
		for i := range racers {
			hit, err := s.IsProcessed(bg, "e", fmt.Sprintf("r%d-%d", r, i))
			require.NoError(t, err)
			if hit {
				processed++
			}
		}
	}
	assert.Equal(t, rounds, processed, "a lost commit left its dedupe mark")
}

// Handlers, a relay, a timer sweep, trace appends and listings all at once: every emitted
// event is relayed exactly once, seqs never repeat, and each execution's entries come in
// commit order. Run with -race.
func TestConcurrentWorkload(t *testing.T) {
	s := memstore.New(memstore.Options{TraceMax: 5, DedupeWindow: 4})
	const execs, commits = 8, 40
	var wg sync.WaitGroup
	for x := range execs {
		wg.Go(func() {
			e := newExe(fmt.Sprintf("e%d", x))
			for i := range commits {
				c := execstore.Commit{
					Emits:            []execstore.Emit{{Event: []byte(fmt.Sprintf("%d-%03d", x, i))}},
					ProcessedEventID: fmt.Sprintf("%d-%03d", x, i),
					Timers:           []execstore.TimerOp{execstore.ScheduleTimer("t", float64(i))},
					Spawns:           []execstore.Spawn{{ChildID: fmt.Sprintf("c%d-%d", x, i)}},
					Trace:            map[string]any{"i": int64(i)},
				}
				// Only appends and sweeps run beside this handler: they never move the version.
				if _, err := s.Commit(bg, e, c); !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	stop := make(chan struct{})
	var side sync.WaitGroup
	side.Go(func() { // trace appends
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := s.AppendTrace(bg, fmt.Sprintf("e%d", i%execs), map[string]any{"append": int64(i)})
			if err != nil {
				assert.ErrorIs(t, err, execstore.ErrNotFound)
			}
		}
	})
	side.Go(func() { // timer sweeps and listings
		for {
			select {
			case <-stop:
				return
			default:
			}
			due, err := s.DueTimers(bg, 1e9, 10)
			assert.NoError(t, err)
			assert.NoError(t, s.DeleteTimers(bg, due))
			_, err = s.List(bg, execstore.ListQuery{Limit: 3})
			assert.NoError(t, err)
		}
	})
	delivered := map[string]int{}
	lastSeq := map[string]int64{}
	relayDone := make(chan struct{})
	go func() {
		defer close(relayDone)
		for {
			pending, err := s.PendingOutbox(bg, 7)
			assert.NoError(t, err)
			for _, p := range pending {
				delivered[string(p.Event)]++
				assert.Greater(t, p.Seq, lastSeq[p.SourceID], "%s out of order", p.Event)
				lastSeq[p.SourceID] = p.Seq
				assert.NoError(t, s.AckOutbox(bg, p.SourceID, p.Seq))
			}
			spawns, err := s.PendingSpawns(bg, 0)
			assert.NoError(t, err)
			for _, sp := range spawns {
				assert.NoError(t, s.AckSpawn(bg, sp.ParentID, sp.Seq))
			}
			select {
			case <-stop:
				if len(pending) == 0 {
					return
				}
			default:
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-relayDone
	side.Wait()
	assert.Len(t, delivered, execs*commits)
	for ev, n := range delivered {
		assert.Equal(t, 1, n, "event %s delivered %d times", ev, n)
	}
	for x := range execs {
		trace, err := s.ReadTrace(bg, fmt.Sprintf("e%d", x))
		require.NoError(t, err)
		require.Len(t, trace, 5)
		for i := 1; i < len(trace); i++ {
			assert.Equal(t, trace[i-1].Index+1, trace[i].Index)
		}
	}
}
