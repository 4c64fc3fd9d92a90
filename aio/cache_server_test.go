package aio_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// cachedConfigs are the configurations of the snapshot cache's tests: alone and grouped.
func cachedConfigs(t *testing.T, test func(t *testing.T, opts aio.Options)) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		opts.CacheSize = testCacheSize
		test(t, opts)
	})
}

// With the cache on, an event handled by the process that owns its execution costs one server
// command: LoadForEvent is answered from memory, and the commit is one update.
func TestCacheOneCommandPerEvent(t *testing.T) {
	cachedConfigs(t, func(t *testing.T, opts aio.Options) {
		h := newHarness(t, opts)
		exe := newExe("x")
		_, err := h.store.Commit(bg, exe, execstore.Commit{ProcessedEventID: "start"})
		require.NoError(t, err)
		h.cmds.reset()
		const events = 20
		for i := range events {
			ev := fmt.Sprint("ev", i)
			got, processed, err := h.store.LoadForEvent(bg, "x", ev)
			require.NoError(t, err)
			require.False(t, processed)
			require.Equal(t, exe.Version, got.Version)
			got.Data = fmt.Appendf(nil, `{"n":%d}`, i+1)
			c := execstore.Commit{ProcessedEventID: ev, Timers: []execstore.TimerOp{execstore.ScheduleTimer("t", unixAt(float64(i)))}}
			if i%5 == 0 {
				c.Trace = map[string]any{"i": i}
			}
			_, err = h.store.Commit(bg, got, c)
			require.NoError(t, err)
			exe = got
		}
		assert.Equal(t, events, len(h.cmds.snapshot()), "one command per event: %v", h.cmds.snapshot())
		for _, name := range h.cmds.snapshot() {
			assert.Equal(t, "update", name)
		}
		st := h.store.Stats()
		assert.EqualValues(t, events, st.CacheHits)
		assert.EqualValues(t, 0, st.CacheMisses)

		// What the cache answers is what the server holds.
		stored, err := h.store.Load(bg, "x")
		require.NoError(t, err)
		assert.Equal(t, exe.Version, stored.Version)
		assert.Equal(t, exe.TraceNext, stored.TraceNext)
		assert.Equal(t, string(exe.Data), string(stored.Data))
		// And it knows the events it committed: a redelivered one is skipped with no command.
		h.cmds.reset()
		_, processed, err := h.store.LoadForEvent(bg, "x", "ev7")
		require.NoError(t, err)
		assert.True(t, processed)
		assert.Empty(t, h.cmds.snapshot())
	})
}

// A commit of an event already processed, by a caller that never asked, is refused by the
// server's guard in the same update as the version guard; one read tells why; nothing of it
// is written.
func TestCommitOfProcessedEventIsRefusedOnTheServer(t *testing.T) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		h := newHarness(t, opts)
		exe := newExe("x")
		_, err := h.store.Commit(bg, exe, execstore.Commit{ProcessedEventID: "e1"})
		require.NoError(t, err)
		before := h.rawDoc(t, "x")
		h.cmds.reset()
		again := *exe
		again.Data = []byte(`{"n":99}`)
		_, err = h.store.Commit(bg, &again, execstore.Commit{ProcessedEventID: "e1",
			Emits:  []execstore.Emit{{TargetID: "y", Event: []byte("no")}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("t", unixAt(5))},
			Spawns: []execstore.Spawn{{ChildID: "c", RootPath: "F.A"}},
			Trace:  map[string]any{"s": 1}})
		var ap *execstore.AlreadyProcessedError
		require.ErrorAs(t, err, &ap)
		assert.ErrorIs(t, err, execstore.ErrAlreadyProcessed)
		assert.NotErrorIs(t, err, execstore.ErrConflict)
		assert.Equal(t, execstore.AlreadyProcessedError{ExecutionID: "x", EventID: "e1", Version: 1}, *ap)
		assert.EqualValues(t, 1, again.Version)
		assert.Equal(t, before, h.rawDoc(t, "x"), "nothing of the refused commit was written")
		assert.EqualValues(t, 1, h.store.Stats().AlreadyProcessed)
		var cmds []string
		for _, name := range h.cmds.snapshot() {
			// The emit's and the spawn's seq blocks: a findAndModify each, and on a counter's
			// first reservation an insert that creates it.
			if name != "findAndModify" && name != "insert" {
				cmds = append(cmds, name)
			}
		}
		if opts.DisableGroupCommit {
			assert.Equal(t, []string{"update", "find"}, cmds, "the guarded update and one read")
		} else {
			assert.Equal(t, []string{"update", "find", "find"}, cmds,
				"the bulk write, its read-back of versions and one read")
		}
	})
}

// A stale cached snapshot (another process committed) ends in a conflict, never a lost
// update: the entry is dropped and the next LoadForEvent reads the server.
func TestCacheStaleEntryConflicts(t *testing.T) {
	cachedConfigs(t, func(t *testing.T, opts aio.Options) {
		h := newHarness(t, opts)
		other := h.reopen(t, aio.Options{})
		exe := newExe("x")
		_, err := h.store.Commit(bg, exe, execstore.Commit{ProcessedEventID: "e1"})
		require.NoError(t, err)

		theirs, err := other.Load(bg, "x")
		require.NoError(t, err)
		theirs.Data = []byte(`{"theirs":1}`)
		_, err = other.Commit(bg, theirs, execstore.Commit{ProcessedEventID: "e2"})
		require.NoError(t, err)

		h.cmds.reset()
		mine, processed, err := h.store.LoadForEvent(bg, "x", "e3")
		require.NoError(t, err)
		assert.False(t, processed)
		assert.EqualValues(t, 1, mine.Version, "answered from the cache: stale")
		assert.Empty(t, h.cmds.snapshot(), "with no server command")
		mine.Data = []byte(`{"mine":1}`)
		_, err = h.store.Commit(bg, mine, execstore.Commit{ProcessedEventID: "e3"})
		var conflict *execstore.ConflictError
		require.ErrorAs(t, err, &conflict)
		assert.Equal(t, execstore.ConflictError{ExecutionID: "x", Expected: 1, Found: 2}, *conflict)

		fresh, processed, err := h.store.LoadForEvent(bg, "x", "e3")
		require.NoError(t, err)
		assert.False(t, processed)
		assert.EqualValues(t, 2, fresh.Version, "the entry was dropped: read from the server")
		assert.Equal(t, `{"theirs":1}`, string(fresh.Data))
		_, err = h.store.Commit(bg, fresh, execstore.Commit{ProcessedEventID: "e3"})
		require.NoError(t, err)
		assert.EqualValues(t, 3, rawInt(t, h.rawDoc(t, "x"), "version"))

		// What the stale entry cost, against two commands (a read and the commit) with the
		// cache off: the failed commit and the read that told why, the reload, the commit.
		// The reload is LoadForEvent's own read: a find on FerretDB 1.x, an aggregation that
		// tests the dedupe set on the server under the MongoDB profile.
		reload := "find"
		if h.store.Server().Profile == server.MongoDB {
			reload = "aggregate"
		}
		want := []string{"update", "find", reload, "update"}
		if !opts.DisableGroupCommit {
			// The bulk write's read-back of versions, then the read of the dedupe set.
			want = []string{"update", "find", "find", reload, "update"}
		}
		assert.Equal(t, want, h.cmds.snapshot())
	})
}

// An event processed by another process is refused by the guard even when the cache did not
// know it; the refusal reports the version that holds it, and the cache reads the server
// next time.
func TestCacheEventProcessedElsewhere(t *testing.T) {
	cachedConfigs(t, func(t *testing.T, opts aio.Options) {
		h := newHarness(t, opts)
		other := h.reopen(t, aio.Options{})
		exe := newExe("x")
		_, err := h.store.Commit(bg, exe, execstore.Commit{})
		require.NoError(t, err)
		theirs, err := other.Load(bg, "x")
		require.NoError(t, err)
		_, err = other.Commit(bg, theirs, execstore.Commit{ProcessedEventID: "e1",
			Emits: []execstore.Emit{{TargetID: "y", Event: []byte("theirs")}}})
		require.NoError(t, err)

		mine, processed, err := h.store.LoadForEvent(bg, "x", "e1")
		require.NoError(t, err)
		require.False(t, processed, "the cache cannot know")
		_, err = h.store.Commit(bg, mine, execstore.Commit{ProcessedEventID: "e1",
			Emits: []execstore.Emit{{TargetID: "y", Event: []byte("mine")}}})
		var ap *execstore.AlreadyProcessedError
		require.ErrorAs(t, err, &ap, "processed and stale: the event is what matters")
		assert.EqualValues(t, 2, ap.Version)
		entries, err := h.store.PendingOutbox(bg, 10)
		require.NoError(t, err)
		require.Len(t, entries, 1)
		assert.Equal(t, "theirs", string(entries[0].Event))

		_, processed, err = h.store.LoadForEvent(bg, "x", "e1")
		require.NoError(t, err)
		assert.True(t, processed)
	})
}

// The cache never answers with a snapshot older than this process's last successful commit,
// with many handlers committing at once (each owning its execution) and group commit on.
func TestCacheNeverBehindOwnCommits(t *testing.T) {
	h := newHarness(t, aio.Options{CacheSize: testCacheSize})
	const handlers, events = 16, 15
	var wg sync.WaitGroup
	errs := make(chan error, handlers)
	for i := range handlers {
		wg.Go(func() {
			id := fmt.Sprint("x", i)
			var last int64
			for n := range events {
				ev := fmt.Sprint(id, "/", n)
				exe, processed, err := h.store.LoadForEvent(bg, id, ev)
				switch {
				case err != nil:
					errs <- err
					return
				case n > 0 && (exe == nil || exe.Version != last):
					errs <- fmt.Errorf("%s: LoadForEvent returned %v after the commit of version %d", id, exe, last)
					return
				case processed:
					errs <- fmt.Errorf("%s: %s reported processed before its commit", id, ev)
					return
				}
				if exe == nil {
					exe = newExe(id)
				}
				exe.Data = fmt.Appendf(nil, `{"n":%d}`, n)
				if _, err := h.store.Commit(bg, exe, execstore.Commit{ProcessedEventID: ev}); err != nil {
					errs <- err
					return
				}
				last = exe.Version
				if _, processed, err := h.store.LoadForEvent(bg, id, ev); err != nil || !processed {
					errs <- fmt.Errorf("%s: %s not reported processed after its commit (%v)", id, ev, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := h.store.Stats()
	assert.Positive(t, st.GroupCommits)
	assert.Less(t, st.GroupCommits, st.GroupedCommits, "commits were grouped")
	t.Logf("cache %d hits, %d misses; %d group commits of %d commits", st.CacheHits, st.CacheMisses, st.GroupCommits, st.GroupedCommits)
}

// AppendTrace moves the trace index the cached snapshot holds: the entry is dropped, so a
// traced commit does not pay a retry.
func TestCacheAppendTraceForgets(t *testing.T) {
	h := newHarness(t, aio.Options{CacheSize: testCacheSize})
	exe := newExe("x")
	_, err := h.store.Commit(bg, exe, execstore.Commit{Trace: map[string]any{"s": 0}})
	require.NoError(t, err)
	require.NoError(t, h.store.AppendTrace(bg, "x", map[string]any{"s": 1}))
	h.cmds.reset()
	got, _, err := h.store.LoadForEvent(bg, "x", "e")
	require.NoError(t, err)
	assert.EqualValues(t, 2, got.TraceNext)
	_, err = h.store.Commit(bg, got, execstore.Commit{ProcessedEventID: "e", Trace: map[string]any{"s": 2}})
	require.NoError(t, err)
	assert.Len(t, h.cmds.snapshot(), 2, "a read and the commit, no retry: %v", h.cmds.snapshot())
	steps, err := h.store.ReadTrace(bg, "x")
	require.NoError(t, err)
	require.Len(t, steps, 3)
	for i, s := range steps {
		assert.EqualValues(t, i, s.Index)
	}
}

// A commit whose outcome is unknown drops the entry: the next LoadForEvent reads the server,
// which has the commit (only its answer was lost).
func TestCacheOutcomeUnknownDrops(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			proxy, uri := proxied(t)
			h := newHarness(t, aio.Options{})
			s, err := aio.Open(bg, uri, aio.Options{DisableRemoteWakes: proxiedStall, Connection: server.Connection{Database: h.opts.Database}, CacheSize: testCacheSize,
				DisableGroupCommit: !grouped})
			require.NoError(t, err)
			defer s.Close(bg)
			exe := newExe("x")
			_, err = s.Commit(bg, exe, execstore.Commit{})
			require.NoError(t, err)
			_, _, err = s.LoadForEvent(bg, "x", "e")
			require.NoError(t, err)
			require.EqualValues(t, 1, s.Stats().CacheHits)

			proxy.AnswersStalled.Store(true)
			f := s.CommitAsync(bg, exe, execstore.Commit{ProcessedEventID: "e"})
			h.awaitVersion(t, "x", 2) // sent and applied; its answer is held
			proxy.CloseAll()
			proxy.AnswersStalled.Store(false)
			if _, err := f.Wait(bg); err != nil {
				require.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
				got, processed, err := s.LoadForEvent(bg, "x", "e")
				require.NoError(t, err)
				assert.EqualValues(t, 1, s.Stats().CacheMisses, "the entry was dropped")
				assert.EqualValues(t, 2, got.Version)
				assert.True(t, processed)
			} else {
				// A group commit may settle the outcome with a read: then it won, and the
				// cache holds what it wrote.
				require.True(t, grouped, "success reported for a commit whose answer was lost")
				got, processed, err := s.LoadForEvent(bg, "x", "e")
				require.NoError(t, err)
				assert.EqualValues(t, 2, got.Version)
				assert.True(t, processed)
			}
		})
	}
}

// The coalesced load's find by _id $in, which the store sends only on MongoDB, returns every
// execution asked for that exists and nothing else, on whichever server the suite runs.
func TestLoadManyReturnsWhatWasAsked(t *testing.T) {
	h := newHarness(t, aio.Options{})
	for _, id := range []string{"a", "b", "c"} {
		exe := newExe(id)
		exe.Data = []byte(`{"id":"` + id + `"}`)
		_, err := h.store.Commit(bg, exe, execstore.Commit{})
		require.NoError(t, err)
	}
	env := opsrun.Env{Layout: ops.Layout{Profile: server.MongoDB}, Executions: h.db.Collection(ops.ExecutionsCollection)}
	got, err := opsrun.LoadMany(bg, env, []string{"a", "c", "missing"})
	require.NoError(t, err)
	require.Len(t, got, 2)
	for _, id := range []string{"a", "c"} {
		assert.Equal(t, `{"id":"`+id+`"}`, string(got[id].Data))
		assert.EqualValues(t, 1, got[id].Version)
	}
}
