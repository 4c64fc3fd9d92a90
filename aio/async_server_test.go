package aio_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/server"
)

// A commit with emits, spawns, timers, a processed id and a trace step is exactly one server
// command once a seq block is available.
func TestCommitIsOneServerCommand(t *testing.T) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		h := newHarness(t, opts)
		e := newExe("e")
		full := func(i int) execstore.Commit {
			return execstore.Commit{
				Emits:            []execstore.Emit{{TargetID: "t", Event: []byte("a")}, {Event: []byte("b")}},
				ProcessedEventID: fmt.Sprintf("ev%d", i),
				Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T.x", unixAt(float64(i))), execstore.CancelTimer("U")},
				Spawns:           []execstore.Spawn{{ChildID: fmt.Sprintf("c%d", i), RootPath: "F.A", Context: map[string]any{"i": i}}},
				Trace:            map[string]any{"i": i},
			}
		}
		// The first commit reserves the first seq blocks; let the prefetch settle.
		_, err := h.store.Commit(bg, e, full(0))
		require.NoError(t, err)
		require.Eventually(t, func() bool { return h.store.Stats().SeqBlocks >= 2 }, 5*time.Second, 10*time.Millisecond)
		for i := 1; i <= 5; i++ {
			h.cmds.reset()
			_, err := h.store.Commit(bg, e, full(i))
			require.NoError(t, err)
			assert.Equal(t, []string{"update"}, h.cmds.snapshot(), "commit %d", i)
		}
		// The create path is one command too.
		h.cmds.reset()
		_, err = h.store.Commit(bg, newExe("fresh"), full(9))
		require.NoError(t, err)
		assert.Equal(t, []string{"insert"}, h.cmds.snapshot())
		assert.EqualValues(t, 6, e.Version)
	})
}

// LoadForEvent is one command: an aggregate on MongoDB, a find by _id on FerretDB.
func TestLoadForEventCommands(t *testing.T) {
	h := newHarness(t, aio.Options{})
	require.NoError(t, h.store.Save(bg, newExe("e")))
	h.cmds.reset()
	_, _, err := h.store.LoadForEvent(bg, "e", "x")
	require.NoError(t, err)
	if h.store.Server().Profile == server.MongoDB {
		assert.Equal(t, []string{"aggregate"}, h.cmds.snapshot())
	} else {
		assert.Equal(t, []string{"find"}, h.cmds.snapshot())
	}
}

// A context that ends while the request waits in a full queue: the caller gets its context
// error on time, and the withdrawn commit is never applied.
func TestContextEndsWhileQueued(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Workers: 1, QueueDepth: 64}})
	// Queue a burst of commits ahead of ours: the single worker needs far longer than 1ms to
	// get through them.
	futures := make([]*aio.Future[[]int64], 200)
	for i := range futures {
		c := newExe(fmt.Sprintf("filler%d", i))
		futures[i] = h.store.CommitAsync(bg, c, execstore.Commit{})
	}
	ctx, cancel := context.WithTimeout(bg, time.Millisecond)
	defer cancel()
	e := newExe("late")
	_, err := h.store.Commit(ctx, e, execstore.Commit{})
	for _, f := range futures {
		_, ferr := f.Wait(bg)
		require.NoError(t, ferr)
	}
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown, "the commit was still queued")
	got, lerr := h.store.Load(bg, "late")
	require.NoError(t, lerr)
	assert.Nil(t, got, "a commit reported as not sent was applied")
}

// A write whose context ends after it was sent is never reported as a plain failure: either
// it succeeded, or the error is ErrOutcomeUnknown wrapping the context error; a reload shows
// the whole commit or none of it.
func TestContextEndsAfterSend(t *testing.T) {
	bothGroupings(t, func(t *testing.T, opts aio.Options) {
		h := newHarness(t, opts)
		var unknown, applied int
		for i := range 30 {
			id := fmt.Sprintf("e%d", i)
			e := newExe(id)
			require.NoError(t, h.store.Save(bg, e))
			ctx, cancel := context.WithTimeout(bg, time.Duration(i%6)*200*time.Microsecond)
			_, err := h.store.Commit(ctx, e, execstore.Commit{
				Emits: []execstore.Emit{{Event: []byte(id)}}, ProcessedEventID: "p" + id,
				Timers: []execstore.TimerOp{execstore.ScheduleTimer("t", unixAt(1))}})
			cancel()
			// A write whose caller gave up may still land a moment later: wait until the server
			// has answered every write in flight, then read the document once, atomically.
			require.NoError(t, h.store.Save(bg, newExe("barrier"+id)))
			time.Sleep(20 * time.Millisecond)
			doc := h.rawDoc(t, id)
			version := rawInt(t, doc, "version")
			whole := version == 2 && rawLen(t, doc, "processed") == 1 && rawInt(t, doc, "outbox_n") == 1 &&
				rawLen(t, doc, "timers") == 1
			none := version == 1 && rawLen(t, doc, "processed") == 0 && rawInt(t, doc, "outbox_n") == 0 &&
				rawLen(t, doc, "timers") == 0
			require.True(t, whole || none, "partial commit visible: %s", doc)
			switch {
			case err == nil:
				applied++
				assert.True(t, whole)
			case errors.Is(err, execstore.ErrOutcomeUnknown):
				unknown++
				assert.ErrorIs(t, err, context.DeadlineExceeded)
			default:
				require.ErrorIs(t, err, context.DeadlineExceeded)
				assert.True(t, none, "a commit reported as not sent was applied")
			}
		}
		t.Logf("applied %d, outcome unknown %d, of 30", applied, unknown)
	})
}

// Many operations in flight from one goroutine through futures.
func TestAsyncFutures(t *testing.T) {
	h := newHarness(t, aio.Options{})
	const n = 50
	futures := make([]*aio.Future[[]int64], n)
	exes := make([]*execstore.Execution, n)
	for i := range n {
		exes[i] = newExe(fmt.Sprintf("e%02d", i))
		futures[i] = h.store.CommitAsync(bg, exes[i], execstore.Commit{Emits: []execstore.Emit{{Event: []byte{byte(i)}}}})
	}
	seen := map[int64]bool{}
	for i, f := range futures {
		<-f.Done()
		seqs, err := f.Result()
		require.NoError(t, err)
		require.Len(t, seqs, 1)
		assert.False(t, seen[seqs[0]], "seq %d handed out twice", seqs[0])
		seen[seqs[0]] = true
		assert.EqualValues(t, 1, exes[i].Version)
	}
	loads := make([]*aio.Future[aio.Loaded], n)
	for i := range n {
		loads[i] = h.store.LoadForEventAsync(bg, exes[i].ID, "x")
	}
	for i, f := range loads {
		l, err := f.Wait(bg)
		require.NoError(t, err)
		require.NotNil(t, l.Execution)
		assert.Equal(t, exes[i].ID, l.Execution.ID)
		assert.False(t, l.Processed)
	}
}

// Close drains queued work, then every call gets ErrClosed.
func TestCloseDrainsThenRefuses(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Workers: 2}})
	s := h.reopen(t, aio.Options{Connection: server.Connection{Workers: 2}})
	futures := make([]*aio.Future[[]int64], 30)
	for i := range futures {
		futures[i] = s.CommitAsync(bg, newExe(fmt.Sprintf("e%d", i)), execstore.Commit{})
	}
	require.NoError(t, s.Close(bg))
	for _, f := range futures {
		_, err := f.Result()
		assert.NoError(t, err)
	}
	assert.EqualValues(t, 30, h.count(t))
	_, err := s.Load(bg, "e1")
	assert.ErrorIs(t, err, execstore.ErrClosed)
	_, err = s.Commit(bg, newExe("after"), execstore.Commit{})
	assert.ErrorIs(t, err, execstore.ErrClosed)
	_, err = s.CommitAsync(bg, newExe("after"), execstore.Commit{}).Result()
	assert.ErrorIs(t, err, execstore.ErrClosed)
	require.NoError(t, s.Close(bg))
}

// A store that sheds load answers a submit to a full queue with ErrOverloaded at once.
func TestShedLoad(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Workers: 1, QueueDepth: 1, ShedLoad: true}})
	var overloaded, ok int
	futures := make([]*aio.Future[[]int64], 200)
	for i := range futures {
		futures[i] = h.store.CommitAsync(bg, newExe(fmt.Sprintf("e%d", i)), execstore.Commit{})
	}
	for _, f := range futures {
		_, err := f.Result()
		switch {
		case err == nil:
			ok++
		case errors.Is(err, execstore.ErrOverloaded):
			overloaded++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	assert.Positive(t, overloaded)
	assert.Positive(t, ok)
	assert.EqualValues(t, ok, h.count(t))
	assert.EqualValues(t, overloaded, h.store.Stats().Overloaded)
}

func TestStats(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	require.NoError(t, h.store.Save(bg, e))
	stale := *e
	require.NoError(t, h.store.Save(bg, e))
	require.ErrorIs(t, h.store.Save(bg, &stale), execstore.ErrConflict)
	_, err := h.store.Load(bg, "e")
	require.NoError(t, err)
	st := h.store.Stats()
	assert.EqualValues(t, 3, st.Ops["commit"].Calls)
	assert.EqualValues(t, 1, st.Ops["commit"].Errors)
	assert.EqualValues(t, 1, st.Ops["load"].Calls)
	assert.EqualValues(t, 1, st.Conflicts)
	assert.Positive(t, st.ServerCommands)
	assert.Zero(t, st.Queued)
	// A worker leaves the in-flight gauge just after it settled its caller's future, so the
	// gauge may still count the load for a moment after Load returned.
	assert.Eventually(t, func() bool { return h.store.Stats().InFlight == 0 }, 10*time.Second, time.Millisecond)
}

// Bad input never reaches the server: no command is sent for it (storetest checks that it is
// refused with ErrInvalid naming the field).
func TestBadInputSendsNothing(t *testing.T) {
	h := newHarness(t, aio.Options{})
	h.cmds.reset()
	_, err := h.store.Commit(bg, &execstore.Execution{ID: "a\x00b", Status: execstore.Running}, execstore.Commit{})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	_, err = h.store.Commit(bg, newExe("ok"), execstore.Commit{Emits: []execstore.Emit{{Event: []byte("x")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("a", time.Time{})}})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	_, err = h.store.Commit(bg, newExe("ok"), execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "c", Context: map[string]any{"f": func() {}}}}})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	_, err = h.store.List(bg, execstore.ListQuery{Cursor: "%%"})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	assert.ErrorIs(t, h.store.AppendTrace(bg, "x", nil), execstore.ErrInvalid)
	assert.ErrorIs(t, h.store.DeleteTimers(bg, []execstore.DueTimer{{Path: "p", FireAt: unixAt(1)}}), execstore.ErrInvalid)
	assert.Empty(t, h.cmds.snapshot(), "bad input reached the server")
}

// A commit that would grow the stored document past 16 MiB, while it is itself well below the
// limit, passes the store's check before I/O (which measures the commit, not the stored
// document) and is sent. Where the server enforces the limit — MongoDB (17419 or 10334),
// FerretDB 2.x and DocumentDB (285999133), the embedded server (17419, from its front) — it
// refuses it with an error matching ErrInvalid, a definite refusal, never an unknown outcome
// or a retry loop, and nothing of it is written.
func TestDocumentGrowthPastLimit(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("big")
	e.Data = make([]byte, 6<<20)
	_, err := h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: make([]byte, 5<<20)}}})
	require.NoError(t, err)
	// 12 MiB of commit on an 11 MiB document: about 17 MiB once applied.
	_, err = h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: make([]byte, 6<<20)}}})

	stored := func(version int64, outbox int) {
		t.Helper()
		assert.EqualValues(t, version, e.Version, "the caller's execution")
		got, err := h.store.Load(bg, "big")
		require.NoError(t, err)
		assert.EqualValues(t, version, got.Version, "the stored execution")
		pending, err := h.store.PendingOutbox(bg, 0)
		require.NoError(t, err)
		assert.Len(t, pending, outbox)
	}
	info := h.store.Server()
	ferretDB1 := info.Family == server.FamilyFerretDB1
	switch {
	case ferretDB1 && srv.External && err == nil:
		// Another FerretDB 1.x: whether its backend enforces the limit is its own; either
		// answer is definite, and this one says the document was stored.
		t.Logf("FerretDB %s stored a document past 16 MiB", info.FerretDBVersion)
		stored(2, 2)
		return
	}
	t.Logf("server: %+v; refusal: %v", info, err)
	require.Error(t, err)
	assert.ErrorIs(t, err, execstore.ErrInvalid, "got %v", err)
	assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown)
	stored(1, 1)
}

// A commit past 16 MiB once encoded is refused before any command is sent — not even a seq
// reservation for its emits (storetest checks the refusal itself, on every store).
func TestCommitPastLimitSendsNothing(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("big")
	e.Data = make([]byte, 13<<20)
	c := execstore.Commit{Emits: slices.Repeat([]execstore.Emit{{TargetID: "t", Event: []byte{'e'}}}, 40_000)}
	h.cmds.reset()
	_, err := h.store.Commit(bg, e, c)
	require.ErrorIs(t, err, execstore.ErrInvalid)
	assert.Empty(t, h.cmds.snapshot(), "no command may be sent")
}
