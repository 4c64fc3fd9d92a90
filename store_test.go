package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/ops"
)

// harness is one store on a database of its own, plus a raw view of that database.
type harness struct {
	store *aio.Store
	db    *mongo.Database
	opts  aio.Options
	cmds  *commandLog
}

// commandLog records the commands a store's client sends.
type commandLog struct {
	mu       sync.Mutex
	names    []string
	commands []bson.Raw
	running  map[string]int // commands sent and not yet answered, by name
	peak     map[string]int // the most ever running at once, by name
}

func (l *commandLog) monitor() *event.CommandMonitor {
	done := func(name string) {
		l.mu.Lock()
		l.running[name]--
		l.mu.Unlock()
	}
	return &event.CommandMonitor{
		Started: func(_ context.Context, e *event.CommandStartedEvent) {
			l.mu.Lock()
			l.names = append(l.names, e.CommandName)
			l.commands = append(l.commands, append(bson.Raw(nil), e.Command...))
			if l.running == nil {
				l.running, l.peak = map[string]int{}, map[string]int{}
			}
			l.running[e.CommandName]++
			l.peak[e.CommandName] = max(l.peak[e.CommandName], l.running[e.CommandName])
			l.mu.Unlock()
		},
		Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) { done(e.CommandName) },
		Failed:    func(_ context.Context, e *event.CommandFailedEvent) { done(e.CommandName) },
	}
}

// peakRunning returns the most commands named name that were ever running at once.
func (l *commandLog) peakRunning(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.peak[name]
}

func (l *commandLog) reset() {
	l.mu.Lock()
	l.names, l.commands = nil, nil
	l.mu.Unlock()
}

// command returns the last command named name that was sent.
func (l *commandLog) command(name string) bson.Raw {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.names) - 1; i >= 0; i-- {
		if l.names[i] == name {
			return l.commands[i]
		}
	}
	return nil
}

func (l *commandLog) snapshot() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.names...)
}

// singleCommits makes newHarness turn group commit and coalescing off; TestWithoutGrouping
// sets it.
var singleCommits bool

func newHarness(t testing.TB, opts aio.Options) *harness {
	t.Helper()
	if singleCommits {
		opts.DisableGroupCommit = true
		opts.DisableCoalescing = true
	}
	if opts.Database == "" {
		opts.Database = testDatabase(t)
	}
	log := &commandLog{}
	opts.ClientOptions = options.Client().SetMonitor(log.monitor())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := aio.Open(ctx, server.URI, opts)
	require.NoError(t, err)
	raw, err := mongo.Connect(options.Client().ApplyURI(server.URI))
	require.NoError(t, err)
	h := &harness{store: s, db: raw.Database(opts.Database), opts: opts, cmds: log}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, s.Close(ctx))
		_ = h.db.Drop(ctx)
		_ = raw.Disconnect(ctx)
	})
	return h
}

// reopen returns a second store on the same database with other options.
func (h *harness) reopen(t testing.TB, opts aio.Options) *aio.Store {
	t.Helper()
	opts.Database = h.opts.Database
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := aio.Open(ctx, server.URI, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close(context.Background())) })
	return s
}

// rawDoc reads the stored document of id in one read, bypassing the store.
func (h *harness) rawDoc(t testing.TB, id string) bson.Raw {
	t.Helper()
	raw, err := h.db.Collection("executions").FindOne(context.Background(), bson.D{{Key: "_id", Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil
	}
	require.NoError(t, err)
	return raw
}

// rawInt reads an integer field of a stored document, whatever BSON number type holds it.
func rawInt(t testing.TB, doc bson.Raw, path ...string) int64 {
	t.Helper()
	v, err := doc.LookupErr(path...)
	require.NoError(t, err, "%v", path)
	n, ok := v.AsInt64OK()
	require.True(t, ok, "%v is %s", path, v.Type)
	return n
}

// rawLen returns the number of elements of an array or keys of a sub-document.
func rawLen(t testing.TB, doc bson.Raw, path ...string) int {
	t.Helper()
	v, err := doc.LookupErr(path...)
	require.NoError(t, err, "%v", path)
	elems, err := bson.Raw(v.Value).Elements()
	require.NoError(t, err)
	return len(elems)
}

func (h *harness) count(t testing.TB) int64 {
	t.Helper()
	n, err := h.db.Collection("executions").CountDocuments(context.Background(), bson.D{})
	require.NoError(t, err)
	return n
}

func newExe(id string) *execstore.Execution {
	return &execstore.Execution{ID: id, DefinitionID: "def", Status: execstore.Running, Data: []byte(`{"n":0}`)}
}

var bg = context.Background()

// 1. First save of a version-0 execution: version 1 in memory and in the store.
func TestFirstSave(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e1")
	require.NoError(t, h.store.Save(bg, e))
	assert.EqualValues(t, 1, e.Version)
	got, err := h.store.Load(bg, "e1")
	require.NoError(t, err)
	require.NotNil(t, got)
	assert.EqualValues(t, 1, got.Version)
	assert.Equal(t, "def", got.DefinitionID)
	assert.Equal(t, execstore.Running, got.Status)
}

// The create path writes every embedded field, so later operators have something to target.
func TestCreateWritesEveryField(t *testing.T) {
	h := newHarness(t, aio.Options{})
	require.NoError(t, h.store.Save(bg, newExe("e1")))
	doc := h.rawDoc(t, "e1")
	elems, err := doc.Elements()
	require.NoError(t, err)
	var keys []string
	for _, e := range elems {
		keys = append(keys, e.Key())
	}
	for _, f := range []string{"_id", "definition_id", "status", "parent_id", "version", "data",
		"outbox", "spawns", "processed", "timers", "trace", "trace_next"} {
		assert.Contains(t, keys, f)
	}
}

// 2. Sequential saves increment the version by one each.
func TestSequentialSaves(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e1")
	for i := 1; i <= 5; i++ {
		e.Data = []byte(fmt.Sprintf(`{"n":%d}`, i))
		require.NoError(t, h.store.Save(bg, e))
		assert.EqualValues(t, i, e.Version)
	}
	got, err := h.store.Load(bg, "e1")
	require.NoError(t, err)
	assert.EqualValues(t, 5, got.Version)
	assert.Equal(t, `{"n":5}`, string(got.Data))
}

// 3. The snapshot round-trips unchanged.
func TestSnapshotRoundTrip(t *testing.T) {
	h := newHarness(t, aio.Options{})
	snapshots := [][]byte{
		[]byte(`{"nested":{"list":[1,2,{"x":"y"}],"map":{"a":{"b":null}}},"unicode":"ünïcødé 日本 🚀","dots":"a.b$c．d"}`),
		{0, 1, 2, 255, 254, 0},
		{},
	}
	for i, snap := range snapshots {
		e := newExe(fmt.Sprintf("e%d", i))
		e.Data = snap
		e.ParentID = "parent"
		require.NoError(t, h.store.Save(bg, e))
		got, err := h.store.Load(bg, e.ID)
		require.NoError(t, err)
		assert.Equal(t, snap, got.Data)
		assert.Equal(t, "parent", got.ParentID)
	}
}

func TestLoadUnknown(t *testing.T) {
	h := newHarness(t, aio.Options{})
	got, err := h.store.Load(bg, "nope")
	require.NoError(t, err)
	assert.Nil(t, got)
}

// 4. Stale write: a conflict with expected and found; the caller's version is restored; the
// store keeps the other copy.
func TestStaleWrite(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e1")
	require.NoError(t, h.store.Save(bg, e))
	other, err := h.store.Load(bg, "e1")
	require.NoError(t, err)
	other.Data = []byte(`"other"`)
	require.NoError(t, h.store.Save(bg, other))

	e.Data = []byte(`"mine"`)
	err = h.store.Save(bg, e)
	require.ErrorIs(t, err, execstore.ErrConflict)
	var ce *execstore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "e1", ce.ExecutionID)
	assert.EqualValues(t, 1, ce.Expected)
	assert.EqualValues(t, 2, ce.Found)
	assert.EqualValues(t, 1, e.Version)
	got, err := h.store.Load(bg, "e1")
	require.NoError(t, err)
	assert.Equal(t, `"other"`, string(got.Data))
	assert.EqualValues(t, 2, got.Version)
}

// version > 0 and no document: conflict with found = none.
func TestCommitMissingDocument(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("ghost")
	e.Version = 3
	err := h.store.Save(bg, e)
	var ce *execstore.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.EqualValues(t, 3, ce.Expected)
	assert.Equal(t, execstore.NoVersion, ce.Found)
	assert.EqualValues(t, 3, e.Version)
	assert.Zero(t, h.count(t))
}

// 5. and 6. Commit with an emit and a processed id, on an existing execution and on the create
// path.
func TestCommitOutboxAndDedupe(t *testing.T) {
	for _, create := range []bool{false, true} {
		t.Run(fmt.Sprintf("create=%v", create), func(t *testing.T) {
			h := newHarness(t, aio.Options{})
			e := newExe("e1")
			if !create {
				require.NoError(t, h.store.Save(bg, e))
			}
			seqs, err := h.store.Commit(bg, e, execstore.Commit{
				Emits:            []execstore.Emit{{TargetID: "parent-1", Event: []byte(`{"id":"x"}`)}},
				ProcessedEventID: "evt-42",
			})
			require.NoError(t, err)
			require.Len(t, seqs, 1)
			pending, err := h.store.PendingOutbox(bg, 0)
			require.NoError(t, err)
			require.Len(t, pending, 1)
			assert.Equal(t, "parent-1", pending[0].TargetID)
			assert.Equal(t, "e1", pending[0].SourceID)
			assert.Equal(t, seqs[0], pending[0].Seq)
			assert.Equal(t, `{"id":"x"}`, string(pending[0].Event))
			assert.Equal(t, e.Version, pending[0].Version)

			hit, err := h.store.IsProcessed(bg, "e1", "evt-42")
			require.NoError(t, err)
			assert.True(t, hit)
			hit, err = h.store.IsProcessed(bg, "e1", "other")
			require.NoError(t, err)
			assert.False(t, hit)

			require.NoError(t, h.store.AckOutbox(bg, "e1", seqs[0]))
			pending, err = h.store.PendingOutbox(bg, 0)
			require.NoError(t, err)
			assert.Empty(t, pending)
			// Acking again, or acking an unknown seq, is a no-op.
			require.NoError(t, h.store.AckOutbox(bg, "e1", seqs[0]))
			require.NoError(t, h.store.AckOutbox(bg, "e1", 999999))
			require.NoError(t, h.store.AckOutbox(bg, "unknown", 1))
			got, err := h.store.Load(bg, "e1")
			require.NoError(t, err)
			assert.Equal(t, e.Version, got.Version)
		})
	}
}

// Acks remove exactly the acked entry.
func TestAckRemovesExactlyOne(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e1")
	seqs, err := h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{
		{TargetID: "a", Event: []byte("1")}, {TargetID: "b", Event: []byte("2")}, {Event: []byte("3")}}})
	require.NoError(t, err)
	require.Len(t, seqs, 3)
	assert.Less(t, seqs[0], seqs[1])
	assert.Less(t, seqs[1], seqs[2])
	require.NoError(t, h.store.AckOutbox(bg, "e1", seqs[1]))
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, 2)
	assert.Equal(t, seqs[0], pending[0].Seq)
	assert.Equal(t, seqs[2], pending[1].Seq)
	assert.Equal(t, "", pending[1].TargetID)
	assert.EqualValues(t, 2, rawInt(t, h.rawDoc(t, "e1"), "outbox_n"))
}

// 7. Outbox order across executions, and an absent target survives as absent.
func TestOutboxOrderAcrossExecutions(t *testing.T) {
	h := newHarness(t, aio.Options{})
	a, b := newExe("a"), newExe("b")
	_, err := h.store.Commit(bg, a, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("E1")}}})
	require.NoError(t, err)
	_, err = h.store.Commit(bg, b, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("E2")}}})
	require.NoError(t, err)
	_, err = h.store.Commit(bg, a, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("E3")}}})
	require.NoError(t, err)
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, pending, 3)
	assert.Equal(t, []string{"E1", "E2", "E3"}, []string{string(pending[0].Event), string(pending[1].Event), string(pending[2].Event)})
	assert.Equal(t, "", pending[2].TargetID)
	assert.Equal(t, bson.TypeNull, h.rawDoc(t, "a").Lookup("outbox", fmt.Sprint(pending[2].Seq), "target_id").Type)

	limited, err := h.store.PendingOutbox(bg, 2)
	require.NoError(t, err)
	assert.Equal(t, pending[:2], limited)
}

// 8. A lost commit leaks nothing.
func TestLostCommitLeaksNothing(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e1")
	require.NoError(t, h.store.Save(bg, e))
	stale := *e
	require.NoError(t, h.store.Save(bg, e))
	_, err := h.store.Commit(bg, &stale, execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "x", Event: []byte("lost")}},
		ProcessedEventID: "evt-lost",
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T", 1)},
		Spawns:           []execstore.Spawn{{ChildID: "c", RootPath: "F.A"}},
		Trace:            map[string]any{"step": "lost"},
	})
	require.ErrorIs(t, err, execstore.ErrConflict)
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	hit, err := h.store.IsProcessed(bg, "e1", "evt-lost")
	require.NoError(t, err)
	assert.False(t, hit)
	due, err := h.store.DueTimers(bg, 10, 0)
	require.NoError(t, err)
	assert.Empty(t, due)
	spawns, err := h.store.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, spawns)
	trace, err := h.store.ReadTrace(bg, "e1")
	require.NoError(t, err)
	assert.Empty(t, trace)
}

// 9. Spawns.
func TestSpawns(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e1")
	require.NoError(t, h.store.Save(bg, e))
	_, err := h.store.Commit(bg, e, execstore.Commit{Spawns: []execstore.Spawn{
		{ChildID: "child-1", RootPath: "Fork.A", Context: map[string]any{"x": int64(1), "a.b": "dotted", "$k": []any{"v"}}}}})
	require.NoError(t, err)
	spawns, err := h.store.PendingSpawns(bg, 0)
	require.NoError(t, err)
	require.Len(t, spawns, 1)
	s := spawns[0]
	assert.Equal(t, "e1", s.ParentID)
	assert.Equal(t, "child-1", s.ChildID)
	assert.Equal(t, "Fork.A", s.RootPath)
	assert.Equal(t, map[string]any{"x": int64(1), "a.b": "dotted", "$k": []any{"v"}}, s.Context)
	require.NoError(t, h.store.AckSpawn(bg, "e1", s.Seq))
	spawns, err = h.store.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, spawns)
	require.NoError(t, h.store.AckSpawn(bg, "e1", s.Seq))
}

// 10. Timers: schedule, re-schedule, cancel.
func TestTimers(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	require.NoError(t, h.store.Save(bg, e))
	due := func(now float64) []execstore.DueTimer {
		d, err := h.store.DueTimers(bg, now, 0)
		require.NoError(t, err)
		return d
	}
	_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Fork.A", 100)}})
	require.NoError(t, err)
	assert.Empty(t, due(50))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: 100}}, due(150))
	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Fork.A", 200)}})
	require.NoError(t, err)
	assert.Empty(t, due(150))
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "Fork.A", FireAt: 200}}, due(250))
	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("Fork.A")}})
	require.NoError(t, err)
	assert.Empty(t, due(250))
}

// Timers come back earliest first across executions, and the last op on a path wins.
func TestTimersOrderAndLastOpWins(t *testing.T) {
	h := newHarness(t, aio.Options{})
	a, b := newExe("a"), newExe("b")
	_, err := h.store.Commit(bg, a, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("x", 30), execstore.ScheduleTimer("y", 10), execstore.CancelTimer("y"),
		execstore.CancelTimer("z"), execstore.ScheduleTimer("z", 5)}})
	require.NoError(t, err)
	_, err = h.store.Commit(bg, b, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("x", 20)}})
	require.NoError(t, err)
	d, err := h.store.DueTimers(bg, 100, 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{
		{ExecutionID: "a", Path: "z", FireAt: 5},
		{ExecutionID: "b", Path: "x", FireAt: 20},
		{ExecutionID: "a", Path: "x", FireAt: 30},
	}, d)
	d, err = h.store.DueTimers(bg, 100, 1)
	require.NoError(t, err)
	assert.Len(t, d, 1)
}

// Timer paths holding ".", "$", the fullwidth stop, "%", NUL or invalid UTF-8 round-trip and
// never collide.
func TestTimerPathEncoding(t *testing.T) {
	h := newHarness(t, aio.Options{})
	paths := []string{"Fork.A", "Fork．A", "$set", "a$b.c", "100%", "%2E", "nul\x00byte", "bad\xffutf8",
		"ünï．.$%", ".", "..", "$", "_id", "timers.x"}
	var ops []execstore.TimerOp
	for i, p := range paths {
		ops = append(ops, execstore.ScheduleTimer(p, float64(i+1)))
	}
	e := newExe("e")
	_, err := h.store.Commit(bg, e, execstore.Commit{Timers: ops})
	require.NoError(t, err)
	d, err := h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	require.Len(t, d, len(paths))
	for i, p := range paths {
		assert.Equal(t, p, d[i].Path)
		assert.EqualValues(t, i+1, d[i].FireAt)
	}
	for i, p := range paths {
		removed, err := h.store.DeleteTimer(bg, "e", p, float64(i+1))
		require.NoError(t, err)
		assert.True(t, removed, p)
	}
	d, err = h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	assert.Empty(t, d)
}

// 11. Guarded delete.
func TestGuardedDelete(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("S", 100)}})
	require.NoError(t, err)
	removed, err := h.store.DeleteTimer(bg, "e", "S", 99)
	require.NoError(t, err)
	assert.False(t, removed)
	d, err := h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	assert.Len(t, d, 1)
	removed, err = h.store.DeleteTimer(bg, "e", "S", 100)
	require.NoError(t, err)
	assert.True(t, removed)
	d, err = h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	assert.Empty(t, d)
}

// 12. Trace: increasing indices; a lower TraceMax keeps exactly the last steps.
func TestTraceRing(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	for i := range 3 {
		_, err := h.store.Commit(bg, e, execstore.Commit{Trace: map[string]any{"step": int64(i)}})
		require.NoError(t, err)
	}
	trace, err := h.store.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 3)
	for i := range trace {
		assert.Equal(t, int64(i), trace[i].Fields["step"])
		if i > 0 {
			assert.Greater(t, trace[i].Index, trace[i-1].Index)
		}
	}

	small := h.reopen(t, aio.Options{TraceMax: 2})
	loaded, err := small.Load(bg, "e")
	require.NoError(t, err)
	_, err = small.Commit(bg, loaded, execstore.Commit{Trace: map[string]any{"step": int64(3)}})
	require.NoError(t, err)
	trace, err = small.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 2)
	assert.Equal(t, int64(2), trace[0].Fields["step"])
	assert.Equal(t, int64(3), trace[1].Fields["step"])
	assert.Greater(t, trace[1].Index, trace[0].Index)
}

// The ring stays bounded in the stored document, on every server.
func TestTraceRingBoundedInStorage(t *testing.T) {
	h := newHarness(t, aio.Options{TraceMax: 3})
	e := newExe("e")
	for i := range 10 {
		c := execstore.Commit{}
		if i%3 != 1 { // some commits carry no step
			c.Trace = map[string]any{"i": int64(i)}
		}
		_, err := h.store.Commit(bg, e, c)
		require.NoError(t, err)
	}
	assert.Equal(t, 3, rawLen(t, h.rawDoc(t, "e"), "trace"), "steps stored")
	trace, err := h.store.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 3)
	assert.Equal(t, []any{int64(6), int64(8), int64(9)},
		[]any{trace[0].Fields["i"], trace[1].Fields["i"], trace[2].Fields["i"]})
}

// AppendTrace stamps the next index, interleaves with commits and needs an existing execution.
func TestAppendTrace(t *testing.T) {
	h := newHarness(t, aio.Options{})
	err := h.store.AppendTrace(bg, "nope", map[string]any{"x": 1})
	require.ErrorIs(t, err, execstore.ErrNotFound)
	assert.Zero(t, h.count(t))

	e := newExe("e")
	_, err = h.store.Commit(bg, e, execstore.Commit{Trace: map[string]any{"k": "c1"}})
	require.NoError(t, err)
	require.NoError(t, h.store.AppendTrace(bg, "e", map[string]any{"k": "a1"}))
	// e.TraceNext is now stale: the commit must still get a fresh, larger index.
	_, err = h.store.Commit(bg, e, execstore.Commit{Trace: map[string]any{"k": "c2"}})
	require.NoError(t, err)
	assert.EqualValues(t, 2, e.Version)
	trace, err := h.store.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 3)
	assert.Equal(t, []int64{0, 1, 2}, []int64{trace[0].Index, trace[1].Index, trace[2].Index})
	assert.Equal(t, []any{"c1", "a1", "c2"}, []any{trace[0].Fields["k"], trace[1].Fields["k"], trace[2].Fields["k"]})

	got, err := h.store.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, 2, got.Version)
	trace, err = h.store.ReadTrace(bg, "unknown")
	require.NoError(t, err)
	assert.Empty(t, trace)
}

// 13. LoadForEvent agrees with IsProcessed.
func TestLoadForEvent(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	_, err := h.store.Commit(bg, e, execstore.Commit{ProcessedEventID: "e1"})
	require.NoError(t, err)
	for _, c := range []struct {
		id, event string
		exists    bool
		hit       bool
	}{{"e", "e1", true, true}, {"e", "e2", true, false}, {"unknown", "e1", false, false}} {
		exe, hit, err := h.store.LoadForEvent(bg, c.id, c.event)
		require.NoError(t, err)
		assert.Equal(t, c.exists, exe != nil)
		assert.Equal(t, c.hit, hit)
		if exe != nil {
			assert.EqualValues(t, 1, exe.Version)
			assert.Equal(t, e.Data, exe.Data)
		}
		p, err := h.store.IsProcessed(bg, c.id, c.event)
		require.NoError(t, err)
		assert.Equal(t, p, hit)
	}
}

// LoadForEvent stays consistent while commits race it: "not processed" is never reported
// for a version that already holds the event.
func TestLoadForEventUnderCommits(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	require.NoError(t, h.store.Save(bg, e))
	const events = 30
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range events {
			_, err := h.store.Commit(bg, e, execstore.Commit{ProcessedEventID: fmt.Sprintf("ev%d", i)})
			assert.NoError(t, err)
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		exe, hit, err := h.store.LoadForEvent(bg, "e", "ev10")
		require.NoError(t, err)
		// Version v+1 is written by the commit that processes ev(v-1); ev10 lands in version 12.
		if exe.Version >= 12 {
			assert.True(t, hit, "version %d holds ev10", exe.Version)
		}
	}
}

// 14. Concurrent saves of copies at the same version: exactly one winner, every round.
func TestConcurrentSavesOneWinner(t *testing.T) {
	h := newHarness(t, aio.Options{})
	const rounds, racers = 10, 12
	for r := range rounds {
		id := fmt.Sprintf("e%d", r)
		base := newExe(id)
		require.NoError(t, h.store.Save(bg, base))
		var wins, conflicts atomic.Int64
		var wg sync.WaitGroup
		copies := make([]*execstore.Execution, racers)
		for i := range racers {
			c := *base
			c.Data = []byte(fmt.Sprintf(`"copy %d"`, i))
			copies[i] = &c
			wg.Go(func() {
				err := h.store.Save(bg, copies[i])
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
		got, err := h.store.Load(bg, id)
		require.NoError(t, err)
		assert.EqualValues(t, 2, got.Version)
	}
}

// Racing creators: exactly one wins.
func TestConcurrentCreatesOneWinner(t *testing.T) {
	h := newHarness(t, aio.Options{})
	const rounds, racers = 10, 12
	for r := range rounds {
		id := fmt.Sprintf("new%d", r)
		var wins atomic.Int64
		var wg sync.WaitGroup
		for range racers {
			wg.Go(func() {
				_, err := h.store.Commit(bg, newExe(id), execstore.Commit{Emits: []execstore.Emit{{Event: []byte("x")}}})
				if err == nil {
					wins.Add(1)
				} else {
					var ce *execstore.ConflictError
					if assert.ErrorAs(t, err, &ce) {
						assert.EqualValues(t, 0, ce.Expected)
						assert.EqualValues(t, 1, ce.Found)
					}
				}
			})
		}
		wg.Wait()
		require.EqualValues(t, 1, wins.Load(), "round %d", r)
	}
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Len(t, pending, rounds)
}

// 15. Concurrent commits with one emit each: exactly one outbox entry per version.
func TestConcurrentCommitsOneOutboxEntry(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	require.NoError(t, h.store.Save(bg, e))
	const rounds, racers = 10, 8
	for r := range rounds {
		cur, err := h.store.Load(bg, "e")
		require.NoError(t, err)
		var wins, conflicts atomic.Int64
		var wg sync.WaitGroup
		for i := range racers {
			c := *cur
			wg.Go(func() {
				_, err := h.store.Commit(bg, &c, execstore.Commit{
					Emits:            []execstore.Emit{{TargetID: "t", Event: []byte(fmt.Sprintf("r%d-%d", r, i))}},
					ProcessedEventID: fmt.Sprintf("r%d-%d", r, i),
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
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Len(t, pending, rounds)
	doc := h.rawDoc(t, "e")
	assert.Equal(t, rounds, rawLen(t, doc, "processed"))
	assert.EqualValues(t, rounds, rawInt(t, doc, "outbox_n"))
	// Every pending entry's event is the processed id of the same winning commit.
	processed := map[string]bool{}
	vals, err := doc.Lookup("processed").Array().Values()
	require.NoError(t, err)
	for _, v := range vals {
		processed[v.StringValue()] = true
	}
	for _, p := range pending {
		assert.True(t, processed[string(p.Event)], "outbox entry %s without its dedupe mark", p.Event)
	}
}

// A relay acking while handlers commit never resurrects or loses an entry.
func TestRelayAcksWhileCommitting(t *testing.T) {
	h := newHarness(t, aio.Options{})
	const execs, commits = 4, 15
	var wg sync.WaitGroup
	for x := range execs {
		wg.Go(func() {
			e := newExe(fmt.Sprintf("e%d", x))
			for i := range commits {
				_, err := h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte(fmt.Sprintf("%d-%d", x, i))}}})
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
			pending, err := h.store.PendingOutbox(bg, 0)
			assert.NoError(t, err)
			for _, p := range pending {
				delivered[string(p.Event)]++
				assert.NoError(t, h.store.AckOutbox(bg, p.SourceID, p.Seq))
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
	assert.Len(t, delivered, execs*commits)
	for ev, n := range delivered {
		assert.Equal(t, 1, n, "event %s delivered %d times", ev, n)
	}
}

// 16. Listing: filters, combinations, small pages reassembled, summaries only, ordered by id.
func TestListing(t *testing.T) {
	h := newHarness(t, aio.Options{})
	type row struct {
		id, def string
		status  execstore.Status
		parent  string
	}
	rows := []row{
		{"a1", "A", execstore.Running, ""}, {"a2", "A", execstore.Done, ""}, {"a3", "A", execstore.Running, "a1"},
		{"b1", "B", execstore.Failed, ""}, {"b2", "B", execstore.Running, "b1"}, {"b3", "B", execstore.Done, ""},
		{"c1", "C", execstore.Suspended, ""}, {"c2", "C", execstore.Cancelled, "a1"}, {"c3", "C", execstore.Pending, ""},
		{"c4", "C", execstore.Running, ""}, {"c5", "C", execstore.Cancelling, "c4"},
	}
	for _, r := range rows {
		e := &execstore.Execution{ID: r.id, DefinitionID: r.def, Status: r.status, ParentID: r.parent, Data: []byte("big snapshot")}
		require.NoError(t, h.store.Save(bg, e))
	}
	listAll := func(q execstore.ListQuery) []string {
		var ids []string
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100)
			page, err := h.store.List(bg, q)
			require.NoError(t, err)
			for _, s := range page.Items {
				ids = append(ids, s.ID)
				assert.EqualValues(t, 1, s.Version)
			}
			if page.NextCursor == "" {
				return ids
			}
			q.Cursor = page.NextCursor
		}
	}
	expect := func(keep func(row) bool) []string {
		var ids []string
		for _, r := range rows {
			if keep(r) {
				ids = append(ids, r.id)
			}
		}
		sort.Strings(ids)
		return ids
	}
	cases := []struct {
		name string
		q    execstore.ListQuery
		keep func(row) bool
	}{
		{"all", execstore.ListQuery{}, func(row) bool { return true }},
		{"definition", execstore.ListQuery{DefinitionID: "A"}, func(r row) bool { return r.def == "A" }},
		{"definition+status", execstore.ListQuery{DefinitionID: "A", Statuses: []execstore.Status{execstore.Running}},
			func(r row) bool { return r.def == "A" && r.status == execstore.Running }},
		{"status set", execstore.ListQuery{Statuses: []execstore.Status{execstore.Done, execstore.Failed}},
			func(r row) bool { return r.status == execstore.Done || r.status == execstore.Failed }},
		{"roots", execstore.ListQuery{RootsOnly: true}, func(r row) bool { return r.parent == "" }},
		{"roots+definition+status", execstore.ListQuery{RootsOnly: true, DefinitionID: "C",
			Statuses: []execstore.Status{execstore.Running, execstore.Pending, execstore.Cancelled}},
			func(r row) bool {
				return r.parent == "" && r.def == "C" && (r.status == execstore.Running || r.status == execstore.Pending)
			}},
		{"nothing", execstore.ListQuery{DefinitionID: "Z"}, func(row) bool { return false }},
	}
	for _, c := range cases {
		for _, limit := range []int{0, 1, 2, 3, 100} {
			q := c.q
			q.Limit = limit
			assert.Equal(t, expect(c.keep), listAll(q), "%s limit %d", c.name, limit)
		}
	}
	page, err := h.store.List(bg, execstore.ListQuery{Limit: 2, DefinitionID: "B"})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	assert.Equal(t, execstore.Summary{ID: "b1", DefinitionID: "B", Status: execstore.Failed, Version: 1}, page.Items[0])
	assert.Equal(t, execstore.Summary{ID: "b2", DefinitionID: "B", Status: execstore.Running, ParentID: "b1", Version: 1}, page.Items[1])
	assert.NotEmpty(t, page.NextCursor)
	last, err := h.store.List(bg, execstore.ListQuery{Limit: 1, DefinitionID: "B", Cursor: page.NextCursor})
	require.NoError(t, err)
	assert.Equal(t, []string{"b3"}, []string{last.Items[0].ID})
	assert.Empty(t, last.NextCursor)

	for _, bad := range []string{"garbage", "!!!", "AQ", "Ag", "AGFiYw", "%%%", "\x00"} {
		_, err := h.store.List(bg, execstore.ListQuery{Cursor: bad})
		assert.ErrorIs(t, err, execstore.ErrInvalid, "cursor %q", bad)
	}
}

// The sweep's hint (timer_min) may be early, never late; on MongoDB a sweep that finds it stale
// repairs it, on FerretDB (where the sweep reads every document anyway) it is left early.
func TestTimerHint(t *testing.T) {
	for _, profile := range []aio.Profile{aio.MongoDB, aio.FerretDB} {
		t.Run(profile.String(), func(t *testing.T) { testTimerHint(t, profile) })
	}
}

// testTimerHint runs TestTimerHint with the profile forced: its commits and sweeps use no
// operator that either server lacks.
func testTimerHint(t *testing.T, profile aio.Profile) {
	h := newHarness(t, aio.Options{Profile: profile})
	e := newExe("e")
	_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("A", 100), execstore.ScheduleTimer("B", 300)}})
	require.NoError(t, err)
	assert.EqualValues(t, 100, h.rawDoc(t, "e").Lookup("timer_min").Double())
	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("A")}})
	require.NoError(t, err)
	assert.EqualValues(t, 100, h.rawDoc(t, "e").Lookup("timer_min").Double(), "a cancel never raises the hint")

	d, err := h.store.DueTimers(bg, 200, 0)
	require.NoError(t, err)
	assert.Empty(t, d)
	if profile == aio.FerretDB {
		assert.EqualValues(t, 100, h.rawDoc(t, "e").Lookup("timer_min").Double(), "the stale hint is left")
	} else {
		assert.EqualValues(t, 300, h.rawDoc(t, "e").Lookup("timer_min").Double(), "the stale hint is repaired")
	}

	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("C", 50)}})
	require.NoError(t, err)
	d, err = h.store.DueTimers(bg, 400, 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "C", FireAt: 50}, {ExecutionID: "e", Path: "B", FireAt: 300}}, d)

	for _, x := range d {
		removed, err := h.store.DeleteTimer(bg, x.ExecutionID, x.Path, x.FireAt)
		require.NoError(t, err)
		assert.True(t, removed)
	}
	d, err = h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	assert.Empty(t, d)
	if profile != aio.FerretDB {
		_, err = h.rawDoc(t, "e").LookupErr("timer_min")
		assert.Error(t, err, "no timer left: no hint")
	}
	d, err = h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	assert.Empty(t, d, "a stale hint brings back no timer")
}

// A limited sweep returns exactly the earliest due timers across many executions, even when
// some hints are stale.
func TestDueTimersLimit(t *testing.T) {
	h := newHarness(t, aio.Options{})
	var all []execstore.DueTimer
	for i := range 20 {
		e := newExe(fmt.Sprintf("e%02d", i))
		at := float64((i*37)%20 + 1)
		ops := []execstore.TimerOp{execstore.ScheduleTimer("x", at)}
		if i%4 == 0 {
			ops = append(ops, execstore.ScheduleTimer("early", 0.5)) // leaves a stale hint once cancelled
		}
		_, err := h.store.Commit(bg, e, execstore.Commit{Timers: ops})
		require.NoError(t, err)
		if i%4 == 0 {
			_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("early")}})
			require.NoError(t, err)
		}
		if at <= 15 {
			all = append(all, execstore.DueTimer{ExecutionID: e.ID, Path: "x", FireAt: at})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].FireAt < all[j].FireAt })
	for _, limit := range []int{1, 3, 7, len(all), 100} {
		d, err := h.store.DueTimers(bg, 15, limit)
		require.NoError(t, err)
		want := all
		if limit < len(all) {
			want = all[:limit]
		}
		assert.Equal(t, want, d, "limit %d", limit)
	}
}

// DeleteTimers removes a sweep's timers in bulk, still guarded by each fire time.
func TestDeleteTimers(t *testing.T) {
	h := newHarness(t, aio.Options{})
	for i := range 10 {
		e := newExe(fmt.Sprintf("e%d", i))
		_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{
			execstore.ScheduleTimer("a.b", float64(i)), execstore.ScheduleTimer("$c", 100)}})
		require.NoError(t, err)
	}
	due, err := h.store.DueTimers(bg, 50, 0)
	require.NoError(t, err)
	require.Len(t, due, 10)
	// e3 re-schedules a.b after the sweep read it: its new timer must survive.
	e3, err := h.store.Load(bg, "e3")
	require.NoError(t, err)
	_, err = h.store.Commit(bg, e3, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", 60)}})
	require.NoError(t, err)
	h.cmds.reset()
	require.NoError(t, h.store.DeleteTimers(bg, due))
	assert.Equal(t, []string{"update"}, h.cmds.snapshot(), "one bulk write")
	left, err := h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	require.Len(t, left, 11)
	assert.Equal(t, execstore.DueTimer{ExecutionID: "e3", Path: "a.b", FireAt: 60}, left[0])
	require.NoError(t, h.store.DeleteTimers(bg, due)) // again: a no-op
	require.NoError(t, h.store.DeleteTimers(bg, nil))
	err = h.store.DeleteTimers(bg, []execstore.DueTimer{{ExecutionID: "x", Path: "p", FireAt: math.NaN()}})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
}

// With a dedupe window the set stays bounded, keeps at least the last window's ids, and
// LoadForEvent agrees with IsProcessed throughout.
func TestDedupeWindow(t *testing.T) {
	for _, profile := range []aio.Profile{aio.Detect, aio.FerretDB} {
		t.Run(fmt.Sprintf("profile=%v", profile), func(t *testing.T) {
			const window, events = 3, 14
			h := newHarness(t, aio.Options{DedupeWindow: window, Profile: profile})
			e := newExe("e")
			for i := range events {
				_, err := h.store.Commit(bg, e, execstore.Commit{ProcessedEventID: fmt.Sprintf("ev%d", i)})
				require.NoError(t, err)
				doc := h.rawDoc(t, "e")
				kept := rawLen(t, doc, "processed_0") + rawLen(t, doc, "processed_1")
				assert.LessOrEqual(t, kept, 2*window, "after %d commits", i+1)
				for j := 0; j <= i; j++ {
					id := fmt.Sprintf("ev%d", j)
					hit, err := h.store.IsProcessed(bg, "e", id)
					require.NoError(t, err)
					if i-j < window {
						assert.True(t, hit, "%s dropped after %d commits", id, i+1)
					}
					if i-j >= 2*window {
						assert.False(t, hit, "%s kept after %d commits", id, i+1)
					}
					_, lhit, err := h.store.LoadForEvent(bg, "e", id)
					require.NoError(t, err)
					assert.Equal(t, hit, lhit, "%s", id)
				}
			}
			assert.EqualValues(t, events, e.Version)
		})
	}
}

// A sweep's hint repair never hides a timer scheduled after the sweep read the document.
func TestTimerHintRepairRacesCommit(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("C", 50)}})
	require.NoError(t, err)
	removed, err := h.store.DeleteTimer(bg, "e", "C", 50)
	require.NoError(t, err)
	require.True(t, removed)
	// The sweep reads the document now: no timer, hint 50 at this version...
	readVersion := e.Version
	// ...a commit schedules P@200 (the hint stays 50: $min)...
	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("P", 200)}})
	require.NoError(t, err)
	// ...and the sweep's repair, computed from what it read, arrives late.
	filter, update := ops.RepairHintCommand("e", readVersion, 50, map[string]float64{})
	res, err := h.db.Collection("executions").UpdateOne(bg, filter, update)
	require.NoError(t, err)
	assert.Zero(t, res.MatchedCount, "a stale repair applied")
	due, err := h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "P", FireAt: 200}}, due)
}

// LoadForEvent racing the creation of its execution never calls an unprocessed event
// processed.
func TestLoadForEventRacesCreate(t *testing.T) {
	h := newHarness(t, aio.Options{Workers: 8})
	for i := range 60 {
		id := fmt.Sprintf("new%d", i)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					exe, hit, err := h.store.LoadForEvent(bg, id, "never")
					assert.NoError(t, err)
					assert.False(t, hit, "an event nobody processed was reported processed (exe %v)", exe != nil)
				}
			})
		}
		require.NoError(t, h.store.Save(bg, newExe(id)))
		close(stop)
		wg.Wait()
	}
}

// An unacknowledged write concern would make every commit's outcome unknown: refused at Open.
func TestOpenRefusesUnacknowledgedWrites(t *testing.T) {
	_, err := aio.Open(bg, server.URI, aio.Options{Database: testDatabase(t), WriteConcern: writeconcern.Unacknowledged()})
	require.ErrorIs(t, err, execstore.ErrInvalid)
}

// Ids, event ids and targets holding ".", "$", the fullwidth stop, spaces and non-ASCII text
// round-trip through every operation.
func TestOddIdsRoundTrip(t *testing.T) {
	h := newHarness(t, aio.Options{})
	ids := []string{"a.b", "$set", "$$ROOT", "Fork．A", "x y", "ünï 日本", "%2E", "_id", "a$b.c"}
	for i, id := range ids {
		event := "$ev." + id
		e := &execstore.Execution{ID: id, DefinitionID: "def." + id, Status: execstore.Running, ParentID: "$p." + id}
		seqs, err := h.store.Commit(bg, e, execstore.Commit{
			Emits:            []execstore.Emit{{TargetID: ids[(i+1)%len(ids)], Event: []byte(event)}},
			ProcessedEventID: event,
			Spawns:           []execstore.Spawn{{ChildID: "$child." + id, RootPath: "R." + id}},
			Timers:           []execstore.TimerOp{execstore.ScheduleTimer(id, float64(i+1))},
			Trace:            map[string]any{id: id},
		})
		require.NoError(t, err, id)
		got, hit, err := h.store.LoadForEvent(bg, id, event)
		require.NoError(t, err, id)
		require.NotNil(t, got, id)
		assert.True(t, hit, id)
		assert.Equal(t, "$p."+id, got.ParentID)
		_, hit, err = h.store.LoadForEvent(bg, id, "$other")
		require.NoError(t, err)
		assert.False(t, hit, id)
		p, err := h.store.IsProcessed(bg, id, event)
		require.NoError(t, err)
		assert.True(t, p, id)
		trace, err := h.store.ReadTrace(bg, id)
		require.NoError(t, err)
		require.Len(t, trace, 1)
		assert.Equal(t, id, trace[0].Fields[id])
		page, err := h.store.List(bg, execstore.ListQuery{DefinitionID: "def." + id})
		require.NoError(t, err)
		require.Len(t, page.Items, 1, id)
		assert.Equal(t, id, page.Items[0].ID)
		require.NoError(t, h.store.AckOutbox(bg, id, seqs[0]))
	}
	due, err := h.store.DueTimers(bg, 100, 0)
	require.NoError(t, err)
	require.Len(t, due, len(ids))
	for i, d := range due {
		assert.Equal(t, ids[i], d.ExecutionID)
		assert.Equal(t, ids[i], d.Path)
	}
	spawns, err := h.store.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Len(t, spawns, len(ids))
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, pending)
	var all []string
	for q := (execstore.ListQuery{Limit: 2}); ; {
		page, err := h.store.List(bg, q)
		require.NoError(t, err)
		for _, s := range page.Items {
			all = append(all, s.ID)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	assert.ElementsMatch(t, ids, all)
}
