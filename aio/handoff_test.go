package aio_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/internal/wake/waketest"
	"github.com/execstore/execstore/server"
)

// Every commit is bracketed by a Begin and an End on the relays' sinks, the End before
// Commit returns, alone or grouped. A won commit hands over what PendingOutbox, PendingSpawns
// and DueTimers then return for it. A conflict and an AlreadyProcessed hand over nil.
func TestCommitsHandedToSinks(t *testing.T) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		h := newHarness(t, opts)
		rec := waketest.Subscribe(t, wake.Of(h.store))
		commit := func(exe *execstore.Execution, c execstore.Commit) ([]waketest.Outcome, error) {
			var err error
			got := rec.Run(exe.ID, func() { _, err = h.store.Commit(bg, exe, c) })
			return got, err
		}

		fire := time.Unix(1_700_000_000, 123_456_789) // not whole microseconds: read back rounded
		e := newExe("e")
		got, err := commit(e, execstore.Commit{
			Emits:  []execstore.Emit{{TargetID: "t", Event: []byte("created")}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("A", fire)},
		})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.NotNil(t, got[0].C, "the creating commit won")
		assert.EqualValues(t, 1, got[0].C.Version)
		waketest.AssertReadBack(t, h.store, got[0].C)

		grouped := h.store.Stats().GroupedCommits
		got, err = commit(e, execstore.Commit{
			Emits: []execstore.Emit{{Event: []byte("one")}, {TargetID: "u", Event: []byte("two")}},
			Spawns: []execstore.Spawn{{ChildID: "c1", RootPath: "F.A", Context: map[string]any{"n": 1, "s": "v",
				"m": map[string]any{"k": []any{int64(2), "x"}}}}, {ChildID: "c2", RootPath: "F.B"}},
			Timers: []execstore.TimerOp{execstore.CancelTimer("A"), execstore.ScheduleTimer("B", fire.Add(time.Second)),
				execstore.ScheduleTimer("C", fire.Add(-time.Hour))},
			ProcessedEventID: "p1",
			Trace:            map[string]any{"step": 1},
		})
		require.NoError(t, err)
		require.Len(t, got, 1)
		require.NotNil(t, got[0].C)
		assert.EqualValues(t, 2, got[0].C.Version)
		assert.Len(t, got[0].C.Outbox, 2)
		assert.Len(t, got[0].C.Spawns, 2)
		assert.Equal(t, []string{"A", "B", "C"}, timerPaths(got[0].C), "the timer ops in commit order")
		waketest.AssertReadBack(t, h.store, got[0].C)
		if !opts.DisableGroupCommit {
			assert.Equal(t, grouped+1, h.store.Stats().GroupedCommits, "the commit went through a group commit")
		}

		stale := *e
		stale.Version--
		got, err = commit(&stale, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("lost")}}})
		require.ErrorIs(t, err, execstore.ErrConflict)
		assert.Equal(t, []waketest.Outcome{{ID: "e"}}, got, "a conflict hands over nothing")

		got, err = commit(e, execstore.Commit{ProcessedEventID: "p1"})
		require.ErrorIs(t, err, execstore.ErrAlreadyProcessed)
		assert.Equal(t, []waketest.Outcome{{ID: "e"}}, got, "an AlreadyProcessed hands over nothing")

		dup := newExe("e") // creates what exists
		got, err = commit(dup, execstore.Commit{})
		require.ErrorIs(t, err, execstore.ErrConflict)
		assert.Equal(t, []waketest.Outcome{{ID: "e"}}, got, "a lost creation hands over nothing")
		assert.Zero(t, rec.Open())
	})
}

// A commit the server refuses hands over nil; where a server stores the document instead (a
// FerretDB 1.x without the embedded server's front does not enforce the 16 MiB limit), it
// hands over what the commit wrote. Either way the End tells what Commit returns.
func TestCommitRefusedByServerHandsOverNothing(t *testing.T) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		h := newHarness(t, opts)
		rec := waketest.Subscribe(t, wake.Of(h.store))
		e := newExe("big")
		e.Data = make([]byte, 6<<20)
		_, err := h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: make([]byte, 5<<20)}}})
		require.NoError(t, err)
		// 12 MiB of commit on an 11 MiB document: about 17 MiB once applied.
		got := rec.Run("big", func() {
			_, err = h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: make([]byte, 6<<20)}}})
		})
		require.Len(t, got, 1)
		t.Logf("server: %+v; outcome: %v", h.store.Server(), err)
		if err == nil {
			require.NotNil(t, got[0].C, "the server stored the commit")
			assert.EqualValues(t, 2, got[0].C.Version)
			return
		}
		assert.ErrorIs(t, err, execstore.ErrInvalid)
		assert.Nil(t, got[0].C, "a refused commit hands over nothing")
	})
}

// While the server does not answer: a commit whose caller gives up after it was sent, alone
// or grouped, ends with nil (its outcome is unknown) before its caller is answered, and the
// answer that comes later ends it no second time. A grouped commit still waiting for a batch
// slot when its caller gives up is never sent, and ends with nil too.
func TestCommitsOfUnknownOutcomeHandOverNothing(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			proxy, uri := proxied(t)
			h := newHarness(t, aio.Options{})
			s, err := aio.Open(bg, uri, aio.Options{DisableRemoteWakes: proxiedStall, Connection: server.Connection{Database: h.opts.Database},
				MaxBatchesInFlight: 1, DisableGroupCommit: !grouped})
			require.NoError(t, err)
			defer s.Close(bg)
			defer proxy.CloseAll() // before Close, so that the stalled writes end
			rec := waketest.Subscribe(t, wake.Of(s))

			a, b := newExe("a"), newExe("b")
			require.NoError(t, s.Save(bg, a))
			require.NoError(t, s.Save(bg, b))
			batches := s.Stats().GroupCommits
			proxy.Stalled.Store(true)
			defer proxy.Stalled.Store(false)

			var sentErr error
			var wg sync.WaitGroup
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(bg, 500*time.Millisecond)
				defer cancel()
				got := rec.Run("a", func() { _, sentErr = s.Commit(ctx, a, execstore.Commit{}) })
				assert.Equal(t, []waketest.Outcome{{ID: "a"}}, got, "an unknown outcome hands over nothing")
			})
			if grouped {
				// a's batch is on the wire and holds the only slot: b waits for it.
				require.Eventually(t, func() bool { return s.Stats().GroupCommits > batches }, 10*time.Second, time.Millisecond)
				ctx, cancel := context.WithTimeout(bg, 200*time.Millisecond)
				defer cancel()
				var queuedErr error
				got := rec.Run("b", func() { _, queuedErr = s.Commit(ctx, b, execstore.Commit{}) })
				assert.ErrorIs(t, queuedErr, context.DeadlineExceeded)
				assert.NotErrorIs(t, queuedErr, execstore.ErrOutcomeUnknown, "b was never sent")
				assert.Equal(t, []waketest.Outcome{{ID: "b"}}, got, "a commit never sent hands over nothing")
			}
			wg.Wait()
			require.ErrorIs(t, sentErr, execstore.ErrOutcomeUnknown)
			proxy.Stalled.Store(false)
			proxy.CloseAll()
			require.NoError(t, s.Close(bg))
			assert.Zero(t, rec.Open(), "every Begin has its End")
		})
	}
}

// A commit whose answer is lost after the server applied it: alone, its outcome is unknown
// and it hands over nil. Grouped, the read that settles the batch may prove it won, and then
// it hands over what it wrote; or it cannot, and hands over nil. The End always agrees with
// what the caller is told, and comes before.
func TestCommitSettledByReadBackHandsOverWhatItSays(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			proxy, uri := proxied(t)
			h := newHarness(t, aio.Options{})
			s, err := aio.Open(bg, uri, aio.Options{DisableRemoteWakes: proxiedStall, Connection: server.Connection{Database: h.opts.Database},
				DisableGroupCommit: !grouped})
			require.NoError(t, err)
			defer s.Close(bg)
			rec := waketest.Subscribe(t, wake.Of(s))
			e := newExe("e")
			// Reserve the seq blocks first, so the lost answer is the commit's own.
			_, err = s.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("warm")}},
				Spawns: []execstore.Spawn{{ChildID: "warm"}}})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return s.Stats().SeqBlocks >= 2 }, 10*time.Second, 10*time.Millisecond)

			proxy.AnswersStalled.Store(true)
			c := execstore.Commit{
				Emits:  []execstore.Emit{{TargetID: "t", Event: []byte("lost answer")}},
				Spawns: []execstore.Spawn{{ChildID: "c", RootPath: "F.A"}},
				Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(1e9))},
			}
			version := e.Version
			got := rec.Run("e", func() {
				f := s.CommitAsync(bg, e, c)
				h.awaitVersion(t, "e", version+1) // sent, and applied
				proxy.CloseAll()
				proxy.AnswersStalled.Store(false)
				_, err = f.Wait(bg)
			})
			require.Len(t, got, 1)
			t.Logf("outcome: %v", err)
			if err != nil {
				require.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
				assert.Nil(t, got[0].C, "an unknown outcome hands over nothing")
				return
			}
			require.True(t, grouped, "only a group commit's read-back proves a commit won")
			require.NotNil(t, got[0].C, "a commit proved won hands over what it wrote")
			assert.EqualValues(t, version+1, got[0].C.Version)
			waketest.AssertReadBack(t, s, got[0].C)
		})
	}
}

// Commits of many executions at once are grouped into batches, and each hands over what it
// wrote, before its caller is answered.
func TestGroupCommittedHandOver(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Workers: 64}})
	rec := waketest.Subscribe(t, wake.Of(h.store))
	const writers, rounds = 16, 5
	handed := make([][]*wake.Committed, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			e := newExe(fmt.Sprintf("w%02d", w))
			require.NoError(t, h.store.Save(bg, e))
			for r := range rounds {
				c := execstore.Commit{
					Emits:            []execstore.Emit{{TargetID: "t", Event: fmt.Appendf(nil, "%d-%d", w, r)}},
					Spawns:           []execstore.Spawn{{ChildID: fmt.Sprintf("c%d-%d", w, r), Context: map[string]any{"r": r}}},
					Timers:           []execstore.TimerOp{execstore.ScheduleTimer(fmt.Sprint("T", r), unixAt(float64(1e9+r)))},
					ProcessedEventID: fmt.Sprint("p", r),
				}
				var err error
				got := rec.Run(e.ID, func() { _, err = h.store.Commit(bg, e, c) })
				if assert.NoError(t, err) && assert.Len(t, got, 1) && assert.NotNil(t, got[0].C) {
					assert.Equal(t, e.Version, got[0].C.Version)
					handed[w] = append(handed[w], got[0].C)
				}
			}
		})
	}
	wg.Wait()
	st := h.store.Stats()
	t.Logf("%d commits in %d bulk writes", st.GroupedCommits, st.GroupCommits)
	assert.Less(t, st.GroupCommits, st.GroupedCommits, "no two commits were ever grouped")
	var all []*wake.Committed
	for _, cs := range handed {
		all = append(all, cs...)
	}
	assert.Len(t, all, writers*rounds)
	waketest.AssertReadBack(t, h.store, all...)
}

// timerPaths returns the paths of c's timer ops, in order.
func timerPaths(c *wake.Committed) []string {
	var paths []string
	for _, op := range c.Timers {
		paths = append(paths, op.Path)
	}
	return paths
}
