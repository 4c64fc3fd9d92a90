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
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/memstore"
)

// 2. Sequential saves increment the version by one each, and each replaces the snapshot and
// the top-level fields.
func TestSequentialSaves(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e1")
	statuses := contract.Statuses()
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

// Every way a version guard fails: a *ConflictError with expected and found, nothing written,
// and the caller's execution untouched (version and trace index alike).
func TestConflicts(t *testing.T) {
	s := memstore.New(memstore.Options{})
	v2 := newExe("v2")
	require.NoError(t, s.Save(bg, v2))
	require.NoError(t, s.Save(bg, v2))
	for _, c := range []struct {
		name           string
		id             string
		version, found int64
	}{
		{"version > 0, no execution", "ghost", 3, execstore.NoVersion},
		{"version 0, execution exists", "v2", 0, 2},
		{"stale version", "v2", 1, 2},
		{"version ahead", "v2", 3, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := snapshot(t, s, "v2", "ghost")
			e := newExe(c.id)
			e.Version, e.TraceNext, e.Data = c.version, 7, []byte("mine")
			want := *e
			_, err := s.Commit(bg, e, everything(9))
			var ce *execstore.ConflictError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, execstore.ErrConflict)
			assert.Equal(t, execstore.ConflictError{ExecutionID: c.id, Expected: c.version, Found: c.found}, *ce)
			assert.Equal(t, want, *e)
			assert.Equal(t, before, snapshot(t, s, "v2", "ghost"))
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
					{TargetID: "c", Event: []byte("3")}},
				ProcessedEventID: "p",
				Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(5)), execstore.ScheduleTimer("U", unixAt(6))},
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
			require.NotEmpty(t, pending)
			at := pending[0].CommittedAt // when the commit was made: storetest checks it
			require.False(t, at.IsZero())
			assert.Equal(t, []execstore.OutboxEntry{
				{Seq: seqs[0], SourceID: "e", Version: e.Version, TargetID: "a", Event: []byte("1"), CommittedAt: at},
				{Seq: seqs[1], SourceID: "e", Version: e.Version, Event: []byte("2"), CommittedAt: at},
				{Seq: seqs[2], SourceID: "e", Version: e.Version, TargetID: "c", Event: []byte("3"), CommittedAt: at},
			}, pending)
			spawns, err := s.PendingSpawns(bg, 0)
			require.NoError(t, err)
			require.Len(t, spawns, 2)
			assert.Equal(t, execstore.SpawnEntry{Seq: spawns[0].Seq, ParentID: "e", ChildID: "c1", RootPath: "F.A",
				Context: map[string]any{}, CommittedAt: at}, spawns[0])
			assert.Equal(t, execstore.SpawnEntry{Seq: spawns[1].Seq, ParentID: "e", ChildID: "c2",
				Context: map[string]any{}, CommittedAt: at}, spawns[1])
			assert.Less(t, spawns[0].Seq, spawns[1].Seq)
			hit, err := s.IsProcessed(bg, "e", "p")
			require.NoError(t, err)
			assert.True(t, hit)
			due, err := s.DueTimers(bg, unixAt(10), 0)
			require.NoError(t, err)
			assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "T", FireAt: unixAt(5), Version: e.Version},
				{ExecutionID: "e", Path: "U", FireAt: unixAt(6), Version: e.Version}}, due, "armed by the commit")
			trace, err := s.ReadTrace(bg, "e")
			require.NoError(t, err)
			assert.Equal(t, []execstore.TraceStep{{Index: 0, Fields: map[string]any{"k": "v"}, At: at}}, trace,
				"the step records its commit's time")
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
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(1))},
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

// 14. and 15. Many copies of one execution racing at each version, each committing an emit and
// a processed id: exactly one winner per version; every loser gets a conflict with expected
// and found and keeps its version; each version leaves exactly one outbox entry and one dedupe
// mark, the winner's, and no loser's mark.
func TestRacingCommitsOneWinnerPerVersion(t *testing.T) {
	s := memstore.New(memstore.Options{})
	require.NoError(t, s.Save(bg, newExe("e")))
	const rounds, racers = 50, 16
	winners := make([]string, rounds)
	for r := range rounds {
		cur, err := s.Load(bg, "e")
		require.NoError(t, err)
		var wins, conflicts atomic.Int64
		var wg sync.WaitGroup
		for i := range racers {
			c := *cur
			id := fmt.Sprintf("r%d-%d", r, i)
			c.Data = []byte(id)
			wg.Go(func() {
				_, err := s.Commit(bg, &c, execstore.Commit{
					Emits:            []execstore.Emit{{TargetID: "t", Event: []byte(id)}},
					ProcessedEventID: id,
				})
				switch {
				case err == nil:
					wins.Add(1)
					winners[r] = id
					assert.Equal(t, cur.Version+1, c.Version)
				case errors.Is(err, execstore.ErrConflict):
					conflicts.Add(1)
					var ce *execstore.ConflictError
					if assert.ErrorAs(t, err, &ce) {
						assert.Equal(t, execstore.ConflictError{ExecutionID: "e", Expected: cur.Version, Found: cur.Version + 1}, *ce)
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
		got, err := s.Load(bg, "e")
		require.NoError(t, err)
		assert.Equal(t, winners[r], string(got.Data), "the store holds the winner's snapshot")
	}
	pending, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, rounds)
	for r, p := range pending {
		assert.EqualValues(t, r+2, p.Version)
		assert.Equal(t, winners[r], string(p.Event))
	}
	for r := range rounds {
		for i := range racers {
			id := fmt.Sprintf("r%d-%d", r, i)
			hit, err := s.IsProcessed(bg, "e", id)
			require.NoError(t, err)
			assert.Equal(t, id == winners[r], hit, id)
		}
	}
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
					Timers:           []execstore.TimerOp{execstore.ScheduleTimer("t", unixAt(float64(i)))},
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
			due, err := s.DueTimers(bg, unixAt(1e9), 10)
			assert.NoError(t, err)
			assert.NoError(t, s.DeleteTimers(bg, due))
			_, err = s.List(bg, execstore.ListQuery{Limit: 3})
			assert.NoError(t, err)
		}
	})
	delivered := map[string]int{}
	lastSeq := map[string]int64{}
	relay := func() int { // one relay pass; the number of entries it handed on
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
		return len(pending)
	}
	side.Go(func() { // the relay, beside the handlers
		for {
			select {
			case <-stop:
				return
			default:
				relay()
			}
		}
	})
	wg.Wait()
	close(stop)
	side.Wait()
	for relay() > 0 { // what the handlers committed last
	}
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

// A commit of an event already in the dedupe set is refused with an *AlreadyProcessedError
// carrying the stored version, whatever the caller's version (current, stale, ahead, or 0 on
// the create path): nothing is written, no seq is taken, and the caller's execution is
// untouched.
func TestAlreadyProcessed(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	mustCommit(t, s, e, everything(1)) // v1 processes p1
	mustCommit(t, s, e, everything(2)) // v2 processes p2
	for _, c := range []struct {
		name    string
		version int64
	}{{"current version", 2}, {"stale version", 1}, {"version ahead", 3}, {"create path", 0}} {
		for _, event := range []string{"p1", "p2"} {
			t.Run(c.name+" "+event, func(t *testing.T) {
				before := snapshot(t, s, "e")
				x := newExe("e")
				x.Version, x.TraceNext, x.Data = c.version, 7, []byte("mine")
				want := *x
				commit := everything(9)
				commit.ProcessedEventID = event
				seqs, err := s.Commit(bg, x, commit)
				assert.Nil(t, seqs)
				var ae *execstore.AlreadyProcessedError
				require.ErrorAs(t, err, &ae)
				assert.ErrorIs(t, err, execstore.ErrAlreadyProcessed)
				assert.NotErrorIs(t, err, execstore.ErrConflict)
				assert.Equal(t, execstore.AlreadyProcessedError{ExecutionID: "e", EventID: event, Version: 2}, *ae)
				assert.Equal(t, want, *x)
				assert.Equal(t, before, snapshot(t, s, "e"))
				hit, err := s.IsProcessed(bg, "e", "p9")
				require.NoError(t, err)
				assert.False(t, hit)
			})
		}
	}
	// The same commit with a fresh event goes through, and the refusals took no seq.
	seqs := mustCommit(t, s, e, everything(3))
	assert.Equal(t, []int64{3}, seqs, "a refused commit took a seq")
	assert.EqualValues(t, 3, e.Version)
	assert.EqualValues(t, 3, e.TraceNext)
}

// The guard looks only at the commit's own execution, only at a non-empty ProcessedEventID,
// and only at the dedupe set, not at outbox events or spawns of the same name.
func TestAlreadyProcessedOnlyForItsEvent(t *testing.T) {
	s := memstore.New(memstore.Options{})
	a := newExe("a")
	mustCommit(t, s, a, everything(1)) // emits ev1, processes p1, spawns c1
	b := newExe("b")
	mustCommit(t, s, b, execstore.Commit{ProcessedEventID: "p1"})
	for range 3 {
		mustCommit(t, s, a, execstore.Commit{})
	}
	mustCommit(t, s, a, execstore.Commit{ProcessedEventID: "ev1"})
	mustCommit(t, s, a, execstore.Commit{ProcessedEventID: "c1"})
	assert.EqualValues(t, 6, a.Version)
	assert.EqualValues(t, 1, b.Version)
}
