package ops

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/server"
)

func mustMarshal(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := bson.Marshal(m)
	require.NoError(t, err)
	return b
}

func fullCommit() *execstore.Commit {
	return &execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "p", Event: []byte("e1")}, {Event: []byte("e2")}},
		ProcessedEventID: "evt",
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("F.A", unixAt(100)), execstore.CancelTimer("G")},
		Spawns:           []execstore.Spawn{{ChildID: "c", RootPath: "F.A", Context: map[string]any{"x": 1}}},
		Trace:            map[string]any{"s": 1},
	}
}

// The MongoDB update of a full commit: one CAS-guarded updateOne with $set, $unset, $inc,
// $push with $slice for the trace ring, and $addToSet for the dedupe mark.
func TestBuildCommitMongoDB(t *testing.T) {
	env := Layout{Profile: server.MongoDB, TraceMax: 200}
	exe := &execstore.Execution{ID: "x", DefinitionID: "d", Status: execstore.Running, Version: 4, Data: []byte("snap"), TraceNext: 7}
	at := time.Date(2026, 12, 4, 10, 0, 0, 123e6, time.UTC)
	p, err := BuildCommit(env, exe, fullCommit(), Seqs{Outbox: []int64{10, 11}, Spawns: []int64{3}, At: at})
	require.NoError(t, err)
	assert.Nil(t, p.Insert)
	assert.Equal(t, []int64{10, 11}, p.OutboxSeqs)
	assert.EqualValues(t, 8, p.TraceNext)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: int64(4)}, {Key: "trace_next", Value: int64(7)},
		{Key: "trace", Value: bson.D{{Key: "$type", Value: "array"}}},
		{Key: "processed", Value: bson.D{{Key: "$ne", Value: "evt"}}}}, p.Filter)
	assert.Equal(t, "evt", p.EventID)
	assert.True(t, p.Traced)
	p1 := "p"
	step := TraceDoc{Index: 7, Step: mustMarshal(t, map[string]any{"s": 1}), At: at}
	assert.Equal(t, bson.D{
		{Key: "$set", Value: bson.D{
			{Key: "version", Value: int64(5)},
			{Key: "data", Value: []byte("snap")},
			{Key: "status", Value: "RUNNING"},
			{Key: "definition_id", Value: "d"},
			{Key: "parent_id", Value: (*string)(nil)},
			{Key: "updated_at", Value: at},
			{Key: "outbox.10", Value: OutboxDoc{Seq: 10, Version: 5, TargetID: &p1, Event: []byte("e1"), At: at}},
			{Key: "outbox.11", Value: OutboxDoc{Seq: 11, Version: 5, Event: []byte("e2"), At: at}},
			{Key: "spawns.3", Value: SpawnDoc{Seq: 3, Version: 5, ChildID: "c", RootPath: "F.A", Context: mustMarshal(t, map[string]any{"x": 1}), At: at}},
			{Key: "timers.F%2EA", Value: 100.0},
			{Key: "timer_v.F%2EA", Value: int64(5)},
			{Key: "trace_next", Value: int64(8)},
		}},
		{Key: "$min", Value: bson.D{{Key: "timer_min", Value: 100.0}}},
		{Key: "$unset", Value: bson.D{{Key: "timers.G", Value: ""}, {Key: "timer_v.G", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(2)}, {Key: "spawns_n", Value: int64(1)}}},
		{Key: "$push", Value: bson.D{{Key: "trace", Value: bson.D{
			{Key: "$each", Value: bson.A{step}},
			{Key: "$slice", Value: -200},
		}}}},
		{Key: "$addToSet", Value: bson.D{{Key: "processed", Value: "evt"}}},
	}, p.Update)
}

// On FerretDB ($slice is ignored there) the trace ring is keyed by index and trimmed with
// $unset in the same update.
func TestBuildCommitFerretDBTraceRing(t *testing.T) {
	env := Layout{Profile: server.FerretDB, TraceMax: 3}
	exe := &execstore.Execution{ID: "x", Status: execstore.Running, Version: 9, TraceNext: 12}
	at := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	p, err := BuildCommit(env, exe, &execstore.Commit{Trace: map[string]any{}}, Seqs{At: at})
	require.NoError(t, err)
	set := p.Update[0].Value.(bson.D)
	assert.Equal(t, bson.E{Key: "trace.12", Value: TraceDoc{Index: 12, Step: mustMarshal(t, map[string]any{}), At: at}}, set[len(set)-1])
	unset := p.Update[1]
	require.Len(t, p.Update, 2)
	assert.Equal(t, "$unset", unset.Key)
	var keys []string
	for _, e := range unset.Value.(bson.D) {
		keys = append(keys, e.Key)
	}
	assert.Equal(t, []string{"trace.9", "trace.8", "trace.7", "trace.6", "trace.5", "trace.4", "trace.3", "trace.2"}, keys)
	for _, e := range p.Update {
		assert.NotEqual(t, "$push", e.Key)
	}
}

// Every commit stamps its time, even one that writes the snapshot alone: the update $sets
// updated_at, a create writes created_at and updated_at, a trace step records it, and a
// finished status also finished_at. Without Seqs.At the commit reads the clock, once.
func TestBuildCommitStampsItsTime(t *testing.T) {
	env := Layout{Profile: server.MongoDB, TraceMax: 200}
	at := time.Date(2026, 12, 4, 10, 0, 0, 7e6, time.UTC)
	fieldsOf := func(d bson.D) map[string]any {
		m := map[string]any{}
		for _, e := range d {
			m[e.Key] = e.Value
		}
		return m
	}
	for _, status := range []execstore.Status{execstore.Running, execstore.Done} {
		exe := &execstore.Execution{ID: "x", Status: status, Version: 3}
		p, err := BuildCommit(env, exe, &execstore.Commit{}, Seqs{At: at})
		require.NoError(t, err)
		set := fieldsOf(p.Update[0].Value.(bson.D))
		assert.Equal(t, at, set["updated_at"], status)
		assert.NotContains(t, set, "created_at", "only a create writes it")
		if status.Finished() {
			assert.Equal(t, at, set["finished_at"])
		} else {
			assert.NotContains(t, set, "finished_at")
		}
		exe.Version = 0
		p, err = BuildCommit(env, exe, &execstore.Commit{}, Seqs{At: at})
		require.NoError(t, err)
		doc := fieldsOf(p.Insert)
		assert.Equal(t, at, doc["created_at"])
		assert.Equal(t, at, doc["updated_at"])
	}
	before := CommitTime()
	p, err := BuildCommit(env, &execstore.Execution{ID: "x", Status: execstore.Running, Version: 3},
		&execstore.Commit{Trace: map[string]any{"s": 1}}, Seqs{})
	require.NoError(t, err)
	stamped := fieldsOf(p.Update[0].Value.(bson.D))["updated_at"].(time.Time)
	assert.False(t, stamped.Before(before))
	assert.Equal(t, stamped, stamped.UTC().Truncate(time.Millisecond), "UTC, to the millisecond")
	push := fieldsOf(p.Update)["$push"].(bson.D)[0].Value.(bson.D)[0].Value.(bson.A)
	assert.Equal(t, stamped, push[0].(TraceDoc).At, "the step records the commit's time")
}

// A snapshot-only commit has no $push, $inc, $unset or $addToSet and no trace guard.
func TestBuildCommitSnapshotOnly(t *testing.T) {
	env := Layout{Profile: server.MongoDB, TraceMax: 200}
	exe := &execstore.Execution{ID: "x", Status: execstore.Done, ParentID: "par", Version: 1, Data: []byte("s")}
	p, err := BuildCommit(env, exe, &execstore.Commit{}, Seqs{})
	require.NoError(t, err)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: int64(1)}}, p.Filter)
	assert.False(t, p.Traced)
	assert.Empty(t, p.EventID)
	require.Len(t, p.Update, 1)
	assert.Equal(t, "$set", p.Update[0].Key)
	assert.EqualValues(t, 0, p.TraceNext)
}

// Version 0 builds the whole document for an insert, with every embedded field present.
func TestBuildCommitCreate(t *testing.T) {
	for _, profile := range []server.Profile{server.MongoDB, server.FerretDB} {
		env := Layout{Profile: profile, TraceMax: 200}
		exe := &execstore.Execution{ID: "x", DefinitionID: "d", Status: execstore.Pending, Data: []byte("s")}
		at := time.Date(2026, 12, 4, 10, 0, 0, 5e6, time.UTC)
		p, err := BuildCommit(env, exe, fullCommit(), Seqs{Outbox: []int64{1, 2}, Spawns: []int64{5}, At: at})
		require.NoError(t, err)
		require.NotNil(t, p.Insert)
		assert.Nil(t, p.Update)
		var keys []string
		for _, e := range p.Insert {
			keys = append(keys, e.Key)
		}
		assert.Equal(t, []string{"_id", "created_at", "updated_at", "definition_id", "status", "parent_id", "version", "data", "outbox", "outbox_n",
			"spawns", "spawns_n", "processed", "timers", "trace", "trace_next", "timer_min", "timer_v"}, keys)
		doc := map[string]any{}
		for _, e := range p.Insert {
			doc[e.Key] = e.Value
		}
		assert.Equal(t, int64(1), doc["version"])
		assert.Equal(t, int64(2), doc["outbox_n"])
		assert.Equal(t, bson.A{"evt"}, doc["processed"])
		assert.Equal(t, bson.D{{Key: "F%2EA", Value: 100.0}}, doc["timers"]) // the cancel of G has nothing to cancel
		assert.Equal(t, int64(1), doc["trace_next"])
		assert.Equal(t, at, doc["created_at"])
		assert.Equal(t, at, doc["updated_at"])
		assert.Equal(t, 100.0, doc["timer_min"])
		assert.Equal(t, bson.D{{Key: "F%2EA", Value: int64(1)}}, doc["timer_v"], "armed by version 1")
		if profile == server.FerretDB {
			assert.IsType(t, bson.D{}, doc["trace"])
		} else {
			assert.IsType(t, bson.A{}, doc["trace"])
		}
	}
}

func TestFoldTimersLastOpWins(t *testing.T) {
	sched, cancels := foldTimers([]execstore.TimerOp{
		execstore.ScheduleTimer("a", unixAt(1)), execstore.CancelTimer("a"),
		execstore.CancelTimer("b"), execstore.ScheduleTimer("b", unixAt(2)),
		execstore.ScheduleTimer("c", unixAt(3)), execstore.ScheduleTimer("c", unixAt(4)),
	})
	assert.Equal(t, bson.D{{Key: "b", Value: 2.0}, {Key: "c", Value: 4.0}}, sched)
	assert.Equal(t, []string{"a"}, cancels)
}

func TestAckCommands(t *testing.T) {
	filter, update := AckOutboxCommand("x", 42)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "outbox.42", Value: bson.D{{Key: "$exists", Value: true}}}}, filter)
	assert.Equal(t, bson.D{
		{Key: "$unset", Value: bson.D{{Key: "outbox.42", Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(-1)}}},
	}, update)
	filter, _ = AckSpawnCommand("y", 6)
	assert.Equal(t, bson.D{{Key: "_id", Value: "y"}, {Key: "spawns.6", Value: bson.D{{Key: "$exists", Value: true}}}}, filter)
	unsetTimer := bson.D{{Key: "$unset", Value: bson.D{{Key: "timers.F%2EA", Value: ""}, {Key: "timer_v.F%2EA", Value: ""}}}}
	filter, update = DeleteTimerCommand("x", "F.A", unixAt(1.5), 0)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "timers.F%2EA", Value: 1.5}}, filter, "no version: path and fire time alone")
	assert.Equal(t, unsetTimer, update)
	filter, update = DeleteTimerCommand("x", "F.A", unixAt(1.5), 9)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "timers.F%2EA", Value: 1.5}, {Key: "timer_v.F%2EA", Value: int64(9)}}, filter)
	assert.Equal(t, unsetTimer, update)
	filter, update = DeleteLastTimerCommand("x", "F.A", unixAt(1.5), 0)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "timers", Value: bson.D{{Key: "F%2EA", Value: 1.5}}}}, filter)
	assert.Equal(t, bson.D{{Key: "$unset", Value: bson.D{{Key: "timers.F%2EA", Value: ""}, {Key: "timer_v.F%2EA", Value: ""},
		{Key: "timer_min", Value: ""}}}}, update)
	filter, _ = DeleteLastTimerCommand("x", "F.A", unixAt(1.5), 9)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "timers", Value: bson.D{{Key: "F%2EA", Value: 1.5}}},
		{Key: "timer_v.F%2EA", Value: int64(9)}}, filter)
	filter, update = DeleteTimerBesidesCommand("x", "F.A", unixAt(1.5), 9)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "timers.F%2EA", Value: 1.5}, {Key: "timer_v.F%2EA", Value: int64(9)},
		{Key: "timers", Value: bson.D{{Key: "$ne", Value: bson.D{{Key: "F%2EA", Value: 1.5}}}}}}, filter)
	assert.Equal(t, unsetTimer, update)
	assert.Equal(t, bson.D{{Key: "outbox_n", Value: bson.D{{Key: "$gt", Value: 0}}}}, PendingOutboxFilter())
	assert.Equal(t, bson.D{{Key: "spawns_n", Value: bson.D{{Key: "$gt", Value: 0}}}}, PendingSpawnsFilter())
}

// BenchmarkBuildCommit measures building the update of a full commit (an emit, a dedupe mark,
// a timer, a spawn and a trace step) and of a snapshot-only one.
func BenchmarkBuildCommit(b *testing.B) {
	env := Layout{Profile: server.MongoDB, TraceMax: 200}
	exe := &execstore.Execution{ID: "exe-1", DefinitionID: "d", Status: execstore.Running, Version: 7,
		Data: make([]byte, 512), TraceNext: 3}
	full := execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "exe-2", Event: make([]byte, 128)}},
		ProcessedEventID: "evt-1",
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("Wait.T", unixAt(1e9))},
		Spawns:           []execstore.Spawn{{ChildID: "c", RootPath: "F.A", Context: map[string]any{"x": 1}}},
		Trace:            map[string]any{"step": "s"},
	}
	seqs := Seqs{Outbox: []int64{41}, Spawns: []int64{9}}
	b.Run("full", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := BuildCommit(env, exe, &full, seqs); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("typical", func(b *testing.B) {
		typical := execstore.Commit{Emits: full.Emits, ProcessedEventID: "evt-1", Timers: full.Timers}
		b.ReportAllocs()
		for range b.N {
			if _, err := BuildCommit(env, exe, &typical, Seqs{Outbox: []int64{41}}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Bytes bounds the encoded size of every write BuildCommit makes from above, whatever the
// keys (dots and dollars escape to three bytes each), ids, entries, profile and window: the
// size check relies on it to skip encoding the writes that are certainly small enough.
func TestCommitBytesBoundsEncodedSize(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	text := func(n int) string {
		const alphabet = "a.$%\x00é日\xff"
		b := make([]byte, 0, n)
		for len(b) < n {
			b = append(b, alphabet[rng.IntN(len(alphabet))])
		}
		return string(b)
	}
	id := func(n int) string { return strings.ToValidUTF8(strings.ReplaceAll(text(n), "\x00", "n"), "x") }
	for i := range 400 {
		env := Layout{Profile: []server.Profile{server.MongoDB, server.FerretDB}[i%2], TraceMax: 1 + rng.IntN(300), DedupeWindow: rng.IntN(3) * 5}
		exe := &execstore.Execution{ID: id(1 + rng.IntN(1024)), DefinitionID: id(rng.IntN(1024)), ParentID: id(rng.IntN(64)),
			Status: execstore.Running, Version: int64(rng.IntN(3)) * int64(rng.IntN(1<<40)), Data: []byte(text(rng.IntN(4096))),
			TraceNext: int64(rng.IntN(1 << 40))}
		c := &execstore.Commit{}
		var seqs Seqs
		for range rng.IntN(20) {
			c.Emits = append(c.Emits, execstore.Emit{TargetID: id(rng.IntN(1024)), Event: []byte(text(rng.IntN(300)))})
			seqs.Outbox = append(seqs.Outbox, rng.Int64())
		}
		for range rng.IntN(5) {
			c.Spawns = append(c.Spawns, execstore.Spawn{ChildID: id(1 + rng.IntN(1024)), RootPath: id(rng.IntN(1024)),
				Context: map[string]any{id(rng.IntN(40)): text(rng.IntN(200))}})
			seqs.Spawns = append(seqs.Spawns, rng.Int64())
		}
		for range rng.IntN(40) {
			if rng.IntN(3) == 0 {
				c.Timers = append(c.Timers, execstore.CancelTimer(text(1+rng.IntN(1024))))
			} else {
				c.Timers = append(c.Timers, execstore.ScheduleTimer(text(1+rng.IntN(1024)), unixAt(rng.Float64()*1e12)))
			}
		}
		if rng.IntN(2) == 0 {
			c.ProcessedEventID = id(1 + rng.IntN(1024))
		}
		if rng.IntN(2) == 0 {
			c.Trace = map[string]any{id(rng.IntN(30)): text(rng.IntN(500)), "n": rng.Int64()}
		}
		p, err := BuildCommit(env, exe, c, seqs)
		require.NoError(t, err)
		var doc any = p.Insert
		if p.Insert == nil {
			p.SetToken(rng.Int64() | 1)
			doc = p.Update
		}
		b, err := bson.Marshal(doc)
		require.NoError(t, err)
		require.GreaterOrEqual(t, p.Bytes, len(b), "case %d: the bound is below the encoded size", i)
	}
}

// A create whose payload looks small enough by its raw lengths, but whose encoded document
// is past 16 MiB (timer paths of dots escape to three bytes each), is refused with ErrInvalid
// by BuildCommit, before anything is sent; so is such an update.
func TestBuildCommitRefusesEncodedSizePastLimit(t *testing.T) {
	exe := &execstore.Execution{ID: "big", Status: execstore.Running, Data: make([]byte, 14<<20)}
	c := &execstore.Commit{}
	for i := range 2000 {
		c.Timers = append(c.Timers, execstore.ScheduleTimer(fmt.Sprintf("%04d%s", i, strings.Repeat(".", 996)), unixAt(1)))
	}
	require.NoError(t, contract.ValidateCommit(exe, c), "the raw lengths pass the first screen")
	for _, version := range []int64{0, 3} {
		exe.Version = version
		_, err := BuildCommit(Layout{Profile: server.MongoDB, TraceMax: 10}, exe, c, Seqs{})
		require.ErrorIs(t, err, execstore.ErrInvalid, "version %d", version)
		assert.Contains(t, err.Error(), "past MongoDB's")
	}
	// Without the timers the same snapshot fits.
	exe.Version = 0
	_, err := BuildCommit(Layout{Profile: server.MongoDB, TraceMax: 10}, exe, &execstore.Commit{}, Seqs{})
	require.NoError(t, err)
}

// Every write that appends a trace step is guarded by its profile's trace shape.
func TestTraceShapeCommands(t *testing.T) {
	isArray := bson.D{{Key: "$type", Value: "array"}}
	mongo, ferret := Layout{Profile: server.MongoDB, TraceMax: 3}, Layout{Profile: server.FerretDB, TraceMax: 3}
	assert.Equal(t, bson.E{Key: "trace", Value: isArray}, traceShapeGuard(mongo))
	assert.Equal(t, bson.E{Key: "trace", Value: bson.D{{Key: "$not", Value: isArray}}}, traceShapeGuard(ferret),
		"not $type object, which MongoDB also matches against an array's elements")

	p, err := BuildCommit(ferret, &execstore.Execution{ID: "x", Status: execstore.Running, Version: 2, TraceNext: 5},
		&execstore.Commit{Trace: map[string]any{}}, Seqs{})
	require.NoError(t, err)
	assert.Equal(t, traceShapeGuard(ferret), p.Filter[len(p.Filter)-1])
	assert.True(t, p.Traced)
	filter, _ := AppendTraceCommand(mongo, "x", TraceDoc{Index: 5})
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "trace_next", Value: int64(5)}, traceShapeGuard(mongo)}, filter)
}

func TestSetToken(t *testing.T) {
	env := Layout{Profile: server.MongoDB, TraceMax: 10}
	p, err := BuildCommit(env, &execstore.Execution{ID: "x", Status: execstore.Running, Version: 2}, &execstore.Commit{}, Seqs{})
	require.NoError(t, err)
	p.SetToken(77)
	set := p.Update[0].Value.(bson.D)
	assert.Equal(t, bson.E{Key: "commit_token", Value: int64(77)}, set[len(set)-1])
	assert.EqualValues(t, 77, p.Token)
}

// unixAt is a fire time given in seconds since the Unix epoch.
func unixAt(seconds float64) time.Time { return time.Unix(0, int64(seconds*1e9)).UTC() }

// A commit carrying acks: each acked entry guarded as present in the filter and unset, and
// the count moved by the entries emitted less those acked, in one $inc (none when they
// cancel out).
func TestBuildCommitCarryingAcks(t *testing.T) {
	env := Layout{Profile: server.MongoDB, TraceMax: 200}
	exe := &execstore.Execution{ID: "x", Status: execstore.Running, Version: 4, Data: []byte("s")}
	p, err := BuildCommit(env, exe, &execstore.Commit{}, Seqs{Acked: []int64{7, 9}})
	require.NoError(t, err)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "version", Value: int64(4)},
		{Key: "outbox.7", Value: bson.D{{Key: "$exists", Value: true}}},
		{Key: "outbox.9", Value: bson.D{{Key: "$exists", Value: true}}}}, p.Filter)
	assert.Equal(t, []int64{7, 9}, p.Acked)
	unset, inc := opOf(p.Update, "$unset"), opOf(p.Update, "$inc")
	assert.Equal(t, bson.D{{Key: "outbox.7", Value: ""}, {Key: "outbox.9", Value: ""}}, unset)
	assert.Equal(t, bson.D{{Key: "outbox_n", Value: int64(-2)}}, inc)

	p, err = BuildCommit(env, exe, &execstore.Commit{Emits: []execstore.Emit{{Event: []byte("e")}}}, Seqs{Outbox: []int64{12}, Acked: []int64{7}})
	require.NoError(t, err)
	assert.Nil(t, opOf(p.Update, "$inc"), "one emitted, one acked: the count stays")
	assert.Equal(t, bson.D{{Key: "outbox.7", Value: ""}}, opOf(p.Update, "$unset"))
}

// opOf returns the operand of update operator op in update, nil when there is none.
func opOf(update bson.D, op string) bson.D {
	for _, e := range update {
		if e.Key == op {
			return e.Value.(bson.D)
		}
	}
	return nil
}
