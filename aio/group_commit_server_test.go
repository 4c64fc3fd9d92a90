package aio_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/server"
)

// With group commit and coalescing off, every commit, ack and load is its own command.
func TestWithoutGroupingSendsNoBatches(t *testing.T) {
	h := newHarness(t, grouping(false, aio.Options{}))
	commitConcurrently(t, h, 8, 5)
	assert.Zero(t, h.store.Stats().GroupCommits)
	assert.Zero(t, h.store.Stats().CoalescedBatches)
}

// commitConcurrently runs writers goroutines, each committing its own execution rounds times
// with an emit and a dedupe mark, and checks the result.
func commitConcurrently(t *testing.T, h *harness, writers, rounds int) {
	t.Helper()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			e := newExe(fmt.Sprintf("w%02d", w))
			require.NoError(t, h.store.Save(bg, e))
			for r := range rounds {
				_, err := h.store.Commit(bg, e, execstore.Commit{
					Emits:            []execstore.Emit{{TargetID: "t", Event: []byte(fmt.Sprintf("%d-%d", w, r))}},
					ProcessedEventID: fmt.Sprintf("p%d", r),
				})
				assert.NoError(t, err)
			}
			assert.EqualValues(t, rounds+1, e.Version)
		})
	}
	wg.Wait()
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Len(t, pending, writers*rounds)
	for w := range writers {
		got, err := h.store.Load(bg, fmt.Sprintf("w%02d", w))
		require.NoError(t, err)
		assert.EqualValues(t, rounds+1, got.Version)
	}
}

// Concurrent commits of different executions are coalesced into fewer bulk writes, and every
// caller still learns its own outcome.
func TestGroupCommitCoalesces(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Workers: 64}})
	commitConcurrently(t, h, 32, 10)
	st := h.store.Stats()
	t.Logf("%d commits in %d bulk writes", st.GroupedCommits, st.GroupCommits)
	assert.EqualValues(t, 32*10, st.GroupedCommits)
	assert.Less(t, st.GroupCommits, st.GroupedCommits, "no two commits were ever grouped")
}

// On FerretDB, whose front admits one write at a time, the store keeps one write batch in
// flight by default, so commits that would have waited at the server join the next batch;
// MaxBatchesInFlight still overrides it.
func TestFerretDBOneWriteBatchInFlight(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Workers: 64, Profile: server.FerretDB}})
	commitConcurrently(t, h, 32, 10)
	st := h.store.Stats()
	t.Logf("%d commits in %d bulk writes", st.GroupedCommits, st.GroupCommits)
	assert.Equal(t, 1, h.cmds.peakRunning("update"), "write batches in flight at once")
	assert.Less(t, st.GroupCommits, st.GroupedCommits, "no two commits were ever grouped")

	h = newHarness(t, aio.Options{Connection: server.Connection{Workers: 64, Profile: server.FerretDB}, MaxBatchesInFlight: 4})
	commitConcurrently(t, h, 32, 10)
	assert.LessOrEqual(t, h.cmds.peakRunning("update"), 4, "write batches in flight at once")
}

// Racing copies inside group commits: exactly one winner per version, losers see the right
// versions, nothing doubled.
func TestGroupCommitRacingCopies(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Workers: 64}})
	const execs, copies, rounds = 6, 5, 6
	var wg sync.WaitGroup
	wins := make([]int, execs)
	var mu sync.Mutex
	for x := range execs {
		require.NoError(t, h.store.Save(bg, newExe(fmt.Sprintf("x%d", x))))
	}
	for r := range rounds {
		for x := range execs {
			cur, err := h.store.Load(bg, fmt.Sprintf("x%d", x))
			require.NoError(t, err)
			for c := range copies {
				cp := *cur
				wg.Go(func() {
					_, err := h.store.Commit(bg, &cp, execstore.Commit{
						Emits: []execstore.Emit{{Event: []byte(fmt.Sprintf("%d-%d-%d", x, r, c))}}})
					var ce *execstore.ConflictError
					switch {
					case err == nil:
						mu.Lock()
						wins[x]++
						mu.Unlock()
					case errors.As(err, &ce):
						assert.Equal(t, cur.Version, ce.Expected)
						assert.Equal(t, cur.Version+1, ce.Found)
					default:
						t.Errorf("unexpected: %v", err)
					}
				})
			}
		}
		wg.Wait()
	}
	for x := range execs {
		assert.Equal(t, rounds, wins[x], "execution %d", x)
		got, err := h.store.Load(bg, fmt.Sprintf("x%d", x))
		require.NoError(t, err)
		assert.EqualValues(t, rounds+1, got.Version)
	}
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Len(t, pending, execs*rounds)
}

// Standalone trace appends racing traced commits: every step gets its own index, in order.
func TestTraceAppendsRacingCommits(t *testing.T) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		opts.Workers = 16
		h := newHarness(t, opts)
		e := newExe("e")
		require.NoError(t, h.store.Save(bg, e))
		const commits, appends = 15, 15
		var wg sync.WaitGroup
		wg.Go(func() {
			for i := range commits {
				_, err := h.store.Commit(bg, e, execstore.Commit{Trace: map[string]any{"c": int64(i)}})
				assert.NoError(t, err)
			}
		})
		wg.Go(func() {
			for i := range appends {
				assert.NoError(t, h.store.AppendTrace(bg, "e", map[string]any{"a": int64(i)}))
			}
		})
		wg.Wait()
		trace, err := h.store.ReadTrace(bg, "e")
		require.NoError(t, err)
		require.Len(t, trace, commits+appends)
		lastC, lastA := int64(-1), int64(-1)
		for i, s := range trace {
			assert.EqualValues(t, i, s.Index)
			if c, ok := s.Fields["c"].(int64); ok {
				assert.Greater(t, c, lastC)
				lastC = c
			} else {
				a := s.Fields["a"].(int64)
				assert.Greater(t, a, lastA)
				lastA = a
			}
		}
		assert.EqualValues(t, commits+1, e.Version)
		for _, s := range trace {
			if s.Fields["c"] == int64(commits-1) {
				assert.Equal(t, s.Index+1, e.TraceNext, "the caller's TraceNext follows its last step")
			}
		}
	})
}

// Loads, LoadForEvent calls and acks issued concurrently each get their own answer, and with
// coalescing on they share server commands.
func TestConcurrentLoadsAndAcks(t *testing.T) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		opts.Workers = 64
		h := newHarness(t, opts)
		const n = 40
		seqs := make([]int64, n)
		for i := range n {
			e := newExe(fmt.Sprintf("e%02d", i))
			e.Data = []byte(fmt.Sprintf("snapshot %d", i))
			s, err := h.store.Commit(bg, e, execstore.Commit{ProcessedEventID: fmt.Sprintf("p%d", i),
				Emits: []execstore.Emit{{Event: []byte{byte(i)}}}})
			require.NoError(t, err)
			seqs[i] = s[0]
		}
		var wg sync.WaitGroup
		for i := range n {
			id := fmt.Sprintf("e%02d", i)
			wg.Go(func() {
				got, err := h.store.Load(bg, id)
				if assert.NoError(t, err) && assert.NotNil(t, got) {
					assert.Equal(t, fmt.Sprintf("snapshot %d", i), string(got.Data))
				}
			})
			wg.Go(func() {
				got, hit, err := h.store.LoadForEvent(bg, id, fmt.Sprintf("p%d", i))
				if assert.NoError(t, err) && assert.NotNil(t, got) {
					assert.True(t, hit)
					assert.Equal(t, id, got.ID)
				}
				_, hit, err = h.store.LoadForEvent(bg, id, fmt.Sprintf("p%d", i+1))
				assert.NoError(t, err)
				assert.False(t, hit)
			})
			wg.Go(func() {
				got, err := h.store.Load(bg, "missing"+id)
				assert.NoError(t, err)
				assert.Nil(t, got)
			})
			wg.Go(func() {
				assert.NoError(t, h.store.AckOutbox(bg, id, seqs[i]))
				assert.NoError(t, h.store.AckOutbox(bg, id, seqs[i])) // again: a no-op
			})
		}
		wg.Wait()
		pending, err := h.store.PendingOutbox(bg, 0)
		require.NoError(t, err)
		assert.Empty(t, pending)
		for i := range n {
			assert.EqualValues(t, 0, rawInt(t, h.rawDoc(t, fmt.Sprintf("e%02d", i)), "outbox_n"))
		}
		st := h.store.Stats()
		t.Logf("%d loads and acks in %d coalesced commands", st.CoalescedOps, st.CoalescedBatches)
		if !opts.DisableCoalescing {
			assert.Less(t, st.CoalescedBatches, st.CoalescedOps, "nothing was coalesced")
		}
	})
}
