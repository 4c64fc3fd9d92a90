package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	"github.com/execstore/execstore/storetest"
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

func newHarness(t testing.TB, opts aio.Options) *harness {
	t.Helper()
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

// contractConfigs are the configurations the contract suite runs the MongoDB store in: group
// commit and coalescing on (the default) and off, and on with the snapshot cache.
var contractConfigs = []struct {
	name string
	opts aio.Options
}{
	{"grouped=true", grouping(true, aio.Options{})},
	{"grouped=false", grouping(false, aio.Options{})},
	{"cached", aio.Options{CacheSize: testCacheSize}},
}

// testCacheSize is the snapshot cache of the tests that turn it on: more executions than any
// test uses, so that nothing is evicted unless a test means it.
const testCacheSize = 1024

// The execstore contract on the MongoDB store, in each of contractConfigs.
func TestContract(t *testing.T) {
	for _, cfg := range contractConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) execstore.Store {
				return newHarness(t, cfg.opts).store
			})
		})
	}
}

// Two MongoDB stores over the same database, as two processes of an engine have them, each
// in each of contractConfigs (so each with a snapshot cache of its own, in "cached").
func TestContractShared(t *testing.T) {
	for _, cfg := range contractConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			storetest.RunShared(t, func(t *testing.T) (execstore.Store, execstore.Store) {
				h := newHarness(t, cfg.opts)
				return h.store, h.reopen(t, cfg.opts)
			})
		})
	}
}

// The trace and dedupe windows on the MongoDB store, with the detected profile's
// formulations, with FerretDB's forced, and with the snapshot cache on.
func TestContractWindows(t *testing.T) {
	for _, cfg := range []struct {
		name string
		opts aio.Options
	}{
		{"profile=detect", aio.Options{}},
		{"profile=ferretdb", aio.Options{Profile: execstore.FerretDB}},
		{"cached", aio.Options{CacheSize: testCacheSize}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			storetest.RunWindows(t, func(t *testing.T, w storetest.Windows) execstore.Store {
				opts := cfg.opts
				opts.TraceMax, opts.DedupeWindow = w.TraceMax, w.DedupeWindow
				return newHarness(t, opts).store
			})
		})
	}
}

// grouping returns opts with group commit and coalescing on or off.
func grouping(on bool, opts aio.Options) aio.Options {
	opts.DisableGroupCommit, opts.DisableCoalescing = !on, !on
	return opts
}

// bothGroupings runs test with group commit and coalescing on, then off.
func bothGroupings(t *testing.T, test func(t *testing.T, opts aio.Options)) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("grouped=%v", on), func(t *testing.T) { test(t, grouping(on, aio.Options{})) })
	}
}

// The document model: a create writes every embedded field, so later operators have something
// to target; an absent target is stored as null; the pending counts follow the entries.
func TestDocumentModel(t *testing.T) {
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
		"outbox", "outbox_n", "spawns", "spawns_n", "processed", "timers", "trace", "trace_next"} {
		assert.Contains(t, keys, f)
	}
	e := newExe("e2")
	seqs, err := h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{
		{TargetID: "a", Event: []byte("1")}, {Event: []byte("2")}}, ProcessedEventID: "p"})
	require.NoError(t, err)
	require.NoError(t, h.store.AckOutbox(bg, "e2", seqs[0]))
	doc = h.rawDoc(t, "e2")
	assert.Equal(t, bson.TypeNull, doc.Lookup("outbox", fmt.Sprint(seqs[1]), "target_id").Type)
	assert.EqualValues(t, 1, rawInt(t, doc, "outbox_n"))
	assert.Equal(t, 1, rawLen(t, doc, "outbox"))
	assert.Equal(t, 1, rawLen(t, doc, "processed"))
}

// Lowering TraceMax on a database that holds longer traces: the next commit keeps exactly
// the last steps.
func TestLoweredTraceMax(t *testing.T) {
	h := newHarness(t, aio.Options{})
	e := newExe("e")
	for i := range 3 {
		_, err := h.store.Commit(bg, e, execstore.Commit{Trace: map[string]any{"step": int64(i)}})
		require.NoError(t, err)
	}
	small := h.reopen(t, aio.Options{TraceMax: 2})
	loaded, err := small.Load(bg, "e")
	require.NoError(t, err)
	_, err = small.Commit(bg, loaded, execstore.Commit{Trace: map[string]any{"step": int64(3)}})
	require.NoError(t, err)
	trace, err := small.ReadTrace(bg, "e")
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

// The sweep's hint (timer_min) may be early, never late; on MongoDB a sweep that finds it stale
// repairs it, on FerretDB (where the sweep reads every document anyway) it is left early.
func TestTimerHint(t *testing.T) {
	for _, profile := range []execstore.Profile{execstore.MongoDB, execstore.FerretDB} {
		t.Run(profile.String(), func(t *testing.T) { testTimerHint(t, profile) })
	}
}

// testTimerHint runs TestTimerHint with the profile forced: its commits and sweeps use no
// operator that either server lacks.
func testTimerHint(t *testing.T, profile execstore.Profile) {
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
	if profile == execstore.FerretDB {
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
	if profile != execstore.FerretDB {
		_, err = h.rawDoc(t, "e").LookupErr("timer_min")
		assert.Error(t, err, "no timer left: no hint")
	}
	d, err = h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	assert.Empty(t, d, "a stale hint brings back no timer")
}

// DeleteTimers sends a sweep's timers in one bulk write.
func TestDeleteTimersIsOneBulkWrite(t *testing.T) {
	h := newHarness(t, aio.Options{})
	for i := range 10 {
		e := newExe(fmt.Sprintf("e%d", i))
		_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", float64(i))}})
		require.NoError(t, err)
	}
	due, err := h.store.DueTimers(bg, 50, 0)
	require.NoError(t, err)
	require.Len(t, due, 10)
	h.cmds.reset()
	require.NoError(t, h.store.DeleteTimers(bg, due))
	assert.Equal(t, []string{"update"}, h.cmds.snapshot(), "one bulk write")
	left, err := h.store.DueTimers(bg, 1000, 0)
	require.NoError(t, err)
	assert.Empty(t, left)
}

// With a dedupe window the stored set stays bounded by twice the window, on either profile's
// formulation (the window's semantics are in storetest).
func TestDedupeWindowBoundedInStorage(t *testing.T) {
	for _, profile := range []execstore.Profile{execstore.Detect, execstore.FerretDB} {
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
			}
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

// An unacknowledged write concern would make every commit's outcome unknown: refused at Open.
func TestOpenRefusesUnacknowledgedWrites(t *testing.T) {
	_, err := aio.Open(bg, server.URI, aio.Options{Database: testDatabase(t), WriteConcern: writeconcern.Unacknowledged()})
	require.ErrorIs(t, err, execstore.ErrInvalid)
}
