package aio_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/aiotest"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/server"
)

// A won commit marks, on the store's board, the holders of another process of its
// partition: the Relay's when it wrote entries, the Sweeper's when it armed a timer within
// the holder's look-ahead. A holder of this process, and one that withdrew, get nothing.
func TestBoardMarksTheHoldersOfOtherProcesses(t *testing.T) {
	ctx := context.Background()
	store, _ := aiotest.Open(t, srv.URI, aio.Options{Connection: server.Connection{Database: testDatabase(t)}})
	b := wake.BoardOf(store)
	require.NotNil(t, b, "an aio store offers a board")
	all := allPartitions(store)
	require.NoError(t, b.Publish(ctx, "far-outbox", wake.Holding{Kind: wake.Outbox, Parts: all}))
	require.NoError(t, b.Publish(ctx, "far-timers", wake.Holding{Kind: wake.Timers, Parts: all, Ahead: 60}))

	exes := map[string]*execstore.Execution{}
	commit := func(id string, c execstore.Commit) {
		t.Helper()
		exe := exes[id]
		if exe == nil {
			exe = &execstore.Execution{ID: id, DefinitionID: "board", Status: execstore.Running}
			exes[id] = exe
		}
		_, err := store.Commit(ctx, exe, c)
		require.NoError(t, err)
	}
	now := time.Now()
	commit("both", execstore.Commit{Emits: []execstore.Emit{{TargetID: "x", Event: []byte("e")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("late", now.Add(time.Hour)), execstore.ScheduleTimer("soon", now.Add(10*time.Second))}})
	commit("far-timer", execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("late", now.Add(time.Hour))}})
	commit("nothing", execstore.Commit{})

	var outbox, timers map[string][]wake.Mark
	require.Eventually(t, func() bool {
		var err error
		outbox, err = b.Marks(ctx, "far-outbox")
		require.NoError(t, err)
		timers, err = b.Marks(ctx, "far-timers")
		require.NoError(t, err)
		return len(outbox) == 1 && len(timers) == 1
	}, 30*time.Second, 5*time.Millisecond, "the commit marks both holders")
	for _, ms := range outbox {
		ms = readOnce(ms)
		require.Len(t, ms, 1)
		assert.NotEmpty(t, ms[0].Outbox, "a small commit's entries are carried")
		ms[0].Outbox = nil
		assert.Equal(t, []wake.Mark{{Seq: 1, ID: "both", Version: 1}}, ms, "the Relay's holder: the commit that wrote an entry, and the version it created")
	}
	for _, ms := range timers {
		ms = readOnce(ms)
		require.Len(t, ms, 1, "the Sweeper's holder: the commit that armed a timer within its look-ahead")
		assert.Equal(t, "both", ms[0].ID)
		assert.EqualValues(t, 1, ms[0].Version)
		assert.InDelta(t, float64(now.Add(10*time.Second).UnixMilli())/1e3, ms[0].FireAt, 0.002, "its earliest fire time")
	}

	// A holder of this process takes the Relay's partitions over (it published last), and
	// another holder the Sweeper's once the first withdrew: the commits mark the latter
	// alone, once the store read the holdings again (it goes by them for a second).
	defer wake.HoldLocally("near-outbox")()
	require.NoError(t, b.Publish(ctx, "near-outbox", wake.Holding{Kind: wake.Outbox, Parts: all}))
	require.NoError(t, b.Withdraw(ctx, "far-timers"))
	require.NoError(t, b.Publish(ctx, "far-timers-2", wake.Holding{Kind: wake.Timers, Parts: all, Ahead: 60}))
	time.Sleep(1100 * time.Millisecond)
	commit("both", execstore.Commit{Emits: []execstore.Emit{{TargetID: "x", Event: []byte("e2")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("soon2", now.Add(5*time.Second))}})
	require.Eventually(t, func() bool {
		m, err := b.Marks(ctx, "far-timers-2")
		require.NoError(t, err)
		return len(m) == 1
	}, 30*time.Second, 5*time.Millisecond, "the commit marks the Sweeper's new holder")
	near, err := b.Marks(ctx, "near-outbox")
	require.NoError(t, err)
	assert.Empty(t, near, "a holder of this process is woken through its signal, not the board")
	gone, err := b.Marks(ctx, "far-timers")
	require.NoError(t, err)
	assert.Empty(t, gone, "a withdrawn holder has no record")
	outbox, err = b.Marks(ctx, "far-outbox")
	require.NoError(t, err)
	for _, ms := range outbox {
		assert.Len(t, readOnce(ms), 1, "the holder that published first lost the partitions to the one that published last")
	}
}

// A mark to the Relay's holder carries the outbox entries of a commit whose events are
// small, as PendingOutbox returns them, and none of a commit whose events are not; a mark
// to the Sweeper's holder carries none.
func TestBoardCarriesSmallCommitsEntries(t *testing.T) {
	ctx := context.Background()
	store, _ := aiotest.Open(t, srv.URI, aio.Options{Connection: server.Connection{Database: testDatabase(t)}})
	b := wake.BoardOf(store)
	all := allPartitions(store)
	require.NoError(t, b.Publish(ctx, "far-outbox", wake.Holding{Kind: wake.Outbox, Parts: all}))
	require.NoError(t, b.Publish(ctx, "far-timers", wake.Holding{Kind: wake.Timers, Parts: all, Ahead: 60}))
	commit := func(id string, c execstore.Commit) {
		t.Helper()
		exe := &execstore.Execution{ID: id, DefinitionID: "board", Status: execstore.Running}
		_, err := store.Commit(ctx, exe, execstore.Commit{})
		require.NoError(t, err)
		_, err = store.Commit(ctx, exe, c)
		require.NoError(t, err)
	}
	commit("small", execstore.Commit{Emits: []execstore.Emit{{TargetID: "x", Event: []byte("e1")}, {Event: []byte("no target")}, {TargetID: "y", Event: []byte{0, 1, 2}}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("soon", time.Now().Add(time.Second))}})
	commit("large", execstore.Commit{Emits: []execstore.Emit{{TargetID: "x", Event: make([]byte, 2000)}}})

	var marks []wake.Mark
	require.Eventually(t, func() bool {
		marks = marksOf(t, b, "far-outbox")
		return len(marks) == 2
	}, 30*time.Second, 5*time.Millisecond, "both commits mark the Relay's holder")
	pending, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	want := map[string][]execstore.OutboxEntry{}
	for _, e := range pending {
		want[e.SourceID] = append(want[e.SourceID], e)
	}
	byID := map[string]wake.Mark{}
	for _, m := range marks {
		byID[m.ID] = m
	}
	require.Len(t, want["small"], 3)
	assert.Equal(t, want["small"], byID["small"].Outbox, "carried as PendingOutbox returns them")
	assert.EqualValues(t, 2, byID["small"].Version)
	assert.Nil(t, byID["large"].Outbox, "a commit whose events are large is read by its holder")
	assert.EqualValues(t, 2, byID["large"].Version)

	timers, err := b.Marks(ctx, "far-timers")
	require.NoError(t, err)
	for _, ms := range timers {
		for _, m := range ms {
			assert.Nil(t, m.Outbox, "the Sweeper's holder is told of a timer, with no entries")
		}
	}
}

// A mark that carries entries names the holder's latest generation the store read before
// the commit was sent: none for the first commit (the store read the holdings after, to
// find the holder), the one before for the first after the holder drew a new one, and the
// new one after that.
func TestBoardNamesTheGenerationReadBeforeTheCommit(t *testing.T) {
	ctx := context.Background()
	store, _ := aiotest.Open(t, srv.URI, aio.Options{Connection: server.Connection{Database: testDatabase(t)}})
	b := wake.BoardOf(store)
	all := allPartitions(store)
	var seen int
	next := func(id string) wake.Mark {
		t.Helper()
		exe := &execstore.Execution{ID: id, DefinitionID: "board", Status: execstore.Running}
		_, err := store.Commit(ctx, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "x", Event: []byte("e")}}})
		require.NoError(t, err)
		var marks []wake.Mark
		require.Eventually(t, func() bool {
			marks = marksOf(t, b, "far-outbox")
			return len(marks) == seen+1
		}, 30*time.Second, 5*time.Millisecond, "the commit of %s marks the holder", id)
		seen++
		m := marks[len(marks)-1]
		require.Equal(t, id, m.ID)
		require.NotEmpty(t, m.Outbox, "a small commit's entries are carried")
		return m
	}
	require.NoError(t, b.Publish(ctx, "far-outbox", wake.Holding{Kind: wake.Outbox, Parts: all, Gen: 7}))
	assert.Zero(t, next("a").Gen, "the store read the holding after the commit was sent")
	assert.EqualValues(t, 7, next("b").Gen, "the holding was read before")

	require.NoError(t, b.Publish(ctx, "far-outbox", wake.Holding{Kind: wake.Outbox, Parts: all, Gen: 8}))
	time.Sleep(1100 * time.Millisecond) // the store goes by what it read for a second
	assert.EqualValues(t, 7, next("c").Gen, "the new generation was read after the commit was sent")
	assert.EqualValues(t, 8, next("d").Gen)
}

// marksOf is what holder reads of its marks on b, every writer's, each Seq once.
func marksOf(t *testing.T, b wake.Board, holder string) []wake.Mark {
	t.Helper()
	m, err := b.Marks(context.Background(), holder)
	require.NoError(t, err)
	var marks []wake.Mark
	for _, ms := range m {
		marks = append(marks, readOnce(ms)...)
	}
	return marks
}

// readOnce is what a holder reads of one writer's marks ms (wake.Cursor): each Seq once. A
// hedged write of marks may have pushed them twice.
func readOnce(ms []wake.Mark) []wake.Mark {
	var c wake.Cursor
	fresh, _ := c.Next(map[string][]wake.Mark{"w": ms})
	return fresh
}

// With DisableRemoteWakes the store offers no board: its commits leave no marks.
func TestBoardDisabled(t *testing.T) {
	store, _ := aiotest.Open(t, srv.URI, aio.Options{Connection: server.Connection{Database: testDatabase(t)}, DisableRemoteWakes: true})
	assert.Nil(t, wake.BoardOf(store))
}

// A write of marks lists its statements by holder, whatever order its commits needed them
// in: every process's writes lock the same holders' documents, and on an engine that locks
// rows in statement order, two writes in different orders would wait on each other.
func TestBoardWritesMarksInHolderOrder(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var writes [][]string // the holders of each update command sent to the board
	monitor := &mongoevent.CommandMonitor{Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
		if e.CommandName != "update" || !strings.HasSuffix(e.DatabaseName, "_wakes") {
			return
		}
		vals, err := e.Command.Lookup("updates").Array().Values()
		if err != nil {
			return
		}
		var holders []string
		for _, v := range vals {
			if v.Document().Lookup("u", "$push").Type == bson.TypeEmbeddedDocument {
				holders = append(holders, v.Document().Lookup("q", "_id").StringValue())
			}
		}
		if len(holders) > 0 {
			mu.Lock()
			writes = append(writes, holders)
			mu.Unlock()
		}
	}}
	store, _ := aiotest.Open(t, srv.URI, aio.Options{Connection: server.Connection{Database: testDatabase(t),
		ClientOptions: options.Client().SetMonitor(monitor)}})
	b := wake.BoardOf(store)
	all := allPartitions(store)
	// A commit marks the Relay's holder first, then the Sweeper's: their names sort the
	// other way.
	require.NoError(t, b.Publish(ctx, "z-outbox", wake.Holding{Kind: wake.Outbox, Parts: all}))
	require.NoError(t, b.Publish(ctx, "a-timers", wake.Holding{Kind: wake.Timers, Parts: all, Ahead: 60}))
	exe := &execstore.Execution{ID: "both", DefinitionID: "board", Status: execstore.Running}
	_, err := store.Commit(ctx, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "x", Event: []byte("e")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("soon", time.Now().Add(10*time.Second))}})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		a, err := b.Marks(ctx, "a-timers")
		require.NoError(t, err)
		z, err := b.Marks(ctx, "z-outbox")
		require.NoError(t, err)
		return len(a) == 1 && len(z) == 1
	}, 30*time.Second, 5*time.Millisecond, "the commit marks both holders")

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, writes)
	for _, holders := range writes {
		assert.Equal(t, []string{"a-timers", "z-outbox"}, holders, "one write, its statements by holder")
	}
}

// allPartitions lists every partition of store.
func allPartitions(store *aio.Store) []int {
	all := make([]int, store.Partitions())
	for p := range all {
		all[p] = p
	}
	return all
}

// A holder follows its record (wake.Follower) with a change stream, asked for by one
// aggregate that changes nothing. On a server that has change streams, the channel receives
// once the stream is open and again after a write to the record, and closes with the
// holder's context. On one that refuses (a standalone server, FerretDB, DocumentDB), it
// closes with no receive, and the store does not ask again for a while: the next Follow
// sends nothing.
func TestBoardFollowAsksForAChangeStream(t *testing.T) {
	var mu sync.Mutex
	var aggregates []bson.Raw // the aggregates sent to the board
	monitor := &mongoevent.CommandMonitor{Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
		if e.CommandName == "aggregate" && strings.HasSuffix(e.DatabaseName, "_wakes") {
			mu.Lock()
			aggregates = append(aggregates, append(bson.Raw(nil), e.Command...))
			mu.Unlock()
		}
	}}
	db := testDatabase(t)
	store, _ := aiotest.Open(t, srv.URI, aio.Options{Connection: server.Connection{Database: db,
		ClientOptions: options.Client().SetMonitor(monitor)}})
	f, ok := wake.BoardOf(store).(wake.Follower)
	require.True(t, ok, "an aio store's board follows its records")
	sent := func() []bson.Raw {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(aggregates)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := f.Follow(ctx, "h-outbox")
	_, open := <-changed
	require.Len(t, sent(), 1, "one aggregate")
	cmd := sent()[0]
	assert.Equal(t, "executions", cmd.Lookup("aggregate").StringValue())
	assert.Equal(t, db+"_wakes", cmd.Lookup("$db").StringValue())
	assert.Equal(t, bson.TypeEmbeddedDocument, cmd.Lookup("cursor").Type)
	var got struct {
		Pipeline []bson.D `bson:"pipeline"`
	}
	require.NoError(t, bson.Unmarshal(cmd, &got))
	want := []bson.D{
		{{Key: "$changeStream", Value: bson.D{}}},
		{{Key: "$match", Value: bson.D{
			{Key: "documentKey._id", Value: "h-outbox"},
			{Key: "operationType", Value: bson.D{{Key: "$in", Value: bson.A{"insert", "update", "replace"}}}},
		}}},
		{{Key: "$project", Value: bson.D{{Key: "_id", Value: int32(1)}}}},
	}
	assert.Equal(t, want, got.Pipeline, "the stream: the writes to the holder's record, each event cut to its resume token")

	if !open {
		t.Logf("the server refused the change stream: %s", srv.URI)
		again := f.Follow(ctx, "h-timers")
		_, open = <-again
		assert.False(t, open, "the refusal holds")
		assert.Len(t, sent(), 1, "the store does not ask again at once")
		return
	}
	b := wake.BoardOf(store)
	require.NoError(t, b.Publish(ctx, "h-outbox", wake.Holding{Kind: wake.Outbox, Parts: []int{0}}))
	select {
	case _, open = <-changed:
		assert.True(t, open, "a write to the record")
	case <-time.After(30 * time.Second):
		t.Fatal("no receive after a write to the record")
	}
	cancel()
	for range changed { // closes with ctx
	}
}
