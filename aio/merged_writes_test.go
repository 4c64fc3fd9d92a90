package aio_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// watchedEnv is an Env of h's database on a client of its own whose commands log records.
func watchedEnv(t *testing.T, h *harness, profile server.Profile, log *commandLog) opsrun.Env {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI).SetMonitor(log.monitor()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(bg) })
	return opsrun.Env{Layout: ops.Layout{Profile: profile}, Executions: client.Database(h.opts.Database).Collection(ops.ExecutionsCollection)}
}

// updateStatements returns the statements of the last update command log has, and whether
// each is an updateMany.
func updateStatements(t *testing.T, log *commandLog) (qs []bson.Raw, multi []bool) {
	t.Helper()
	cmd := log.command("update")
	require.NotNil(t, cmd, "no update was sent")
	vals, err := cmd.Lookup("updates").Array().Values()
	require.NoError(t, err)
	for _, v := range vals {
		qs = append(qs, v.Document().Lookup("q").Document())
		m, _ := v.Document().Lookup("multi").BooleanOK()
		multi = append(multi, m)
	}
	return qs, multi
}

// On the FerretDB profile, acks of entries of different documents go out as one updateMany
// statement, which removes exactly the acked entries and decrements each count by one; a
// second ack of a document already in it starts the next statement, and an ack
// of an entry already gone changes nothing. On the MongoDB profile each is its own updateOne.
// Both leave the same documents.
func TestAcksMergeOnTheFerretDBProfile(t *testing.T) {
	for _, profile := range []server.Profile{server.FerretDB, server.MongoDB} {
		t.Run(string(profile), func(t *testing.T) {
			h := newHarness(t, aio.Options{DisableAckCarrying: true})
			seqs := map[string][]int64{}
			for _, id := range []string{"a", "b", "c"} {
				exe := newExe(id)
				mustCommit(t, h.store, exe, execstore.Commit{})
				s, err := h.store.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{
					{TargetID: "t", Event: []byte("1")}, {TargetID: "t", Event: []byte("2")}}})
				require.NoError(t, err)
				seqs[id] = s
			}
			require.NoError(t, h.store.AckOutbox(bg, "c", seqs["c"][0])) // gone before the batch
			log := &commandLog{}
			env := watchedEnv(t, h, profile, log)
			writes := []opsrun.IdempotentWrite{
				opsrun.OutboxAckWrite("b", seqs["b"][0]),
				opsrun.OutboxAckWrite("a", seqs["a"][0]),
				opsrun.OutboxAckWrite("b", seqs["b"][1]),
				opsrun.OutboxAckWrite("c", seqs["c"][0]),
			}
			log.reset()
			for i, err := range opsrun.IdempotentWrites(bg, env, writes) {
				require.NoError(t, err, "write %d", i)
			}
			qs, multi := updateStatements(t, log)
			if profile == server.FerretDB {
				assert.Equal(t, []bool{true, true}, multi, "two updateMany statements")
				var ids [][]string
				for _, q := range qs {
					in, err := q.Lookup("_id", "$in").Array().Values()
					require.NoError(t, err)
					var each []string
					for _, v := range in {
						each = append(each, v.StringValue())
					}
					ids = append(ids, each)
				}
				assert.Equal(t, [][]string{{"a", "b"}, {"b", "c"}}, ids, "in _id order, a document once a statement")
			} else {
				assert.Equal(t, []bool{false, false, false, false}, multi, "one updateOne each")
			}
			for id, want := range map[string][]int64{"a": {seqs["a"][1]}, "b": nil, "c": {seqs["c"][1]}} {
				stored, n := outboxOf(t, h, id)
				assert.ElementsMatch(t, want, stored, id)
				assert.EqualValues(t, len(want), n, "%s's count", id)
			}
		})
	}
}

// On the FerretDB profile, timer deletes of one path merge into one updateMany that removes
// each timer only while it still fires at its own time: a timer re-armed since stays. Deletes
// of different paths are not merged (each document's path is unset by the statement).
func TestTimerDeletesMergeByPath(t *testing.T) {
	h := newHarness(t, aio.Options{DisableAckCarrying: true})
	for i, id := range []string{"x", "y", "z"} {
		exe := newExe(id)
		mustCommit(t, h.store, exe, execstore.Commit{})
		mustCommit(t, h.store, exe, execstore.Commit{Timers: []execstore.TimerOp{
			execstore.ScheduleTimer("T", unixAt(1)), execstore.ScheduleTimer("U", unixAt(float64(2+i)))}})
		if id == "z" {
			mustCommit(t, h.store, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(5))}})
		}
	}
	log := &commandLog{}
	env := watchedEnv(t, h, server.FerretDB, log)
	var writes []opsrun.IdempotentWrite
	for _, id := range []string{"z", "y", "x"} {
		writes = append(writes, opsrun.DeleteTimerWrite(id, "T", unixAt(1), 0))
	}
	log.reset()
	for i, err := range opsrun.IdempotentWrites(bg, env, writes) {
		require.NoError(t, err, "write %d", i)
	}
	_, multi := updateStatements(t, log)
	assert.Equal(t, []bool{true}, multi, "one updateMany")
	for id, want := range map[string][]string{"x": {"U"}, "y": {"U"}, "z": {"T", "U"}} {
		var got []string
		for k := range timersOf(t, h, id) {
			got = append(got, k)
		}
		assert.ElementsMatch(t, want, got, "%s's timers", id)
	}

	mixed := []opsrun.IdempotentWrite{opsrun.DeleteTimerWrite("x", "U", unixAt(2), 0), opsrun.DeleteTimerWrite("y", "T", unixAt(1), 0), opsrun.DeleteTimerWrite("z", "T", unixAt(5), 0)}
	log.reset()
	for i, err := range opsrun.IdempotentWrites(bg, env, mixed) {
		require.NoError(t, err, "write %d", i)
	}
	_, multi = updateStatements(t, log)
	assert.Equal(t, []bool{false, false, false}, multi, "paths differ: one updateOne each")
	for id, want := range map[string]int{"x": 0, "y": 1, "z": 1} {
		assert.Len(t, timersOf(t, h, id), want, fmt.Sprintf("%s's timers", id))
	}
}

// On the MongoDB profile a document's writes are one updateOne guarded by all of them. When
// one guard misses (b's first entry is gone already), it matches nothing and changes
// nothing, and the writes go out one statement each: the others are applied, the count goes
// down once. On the FerretDB profile they are statements of their own from the start.
func TestDocumentWritesShareOneStatement(t *testing.T) {
	for _, profile := range []server.Profile{server.MongoDB, server.FerretDB} {
		t.Run(string(profile), func(t *testing.T) {
			h := newHarness(t, aio.Options{DisableAckCarrying: true})
			seqs := map[string][]int64{}
			for _, id := range []string{"a", "b"} {
				exe := newExe(id)
				mustCommit(t, h.store, exe, execstore.Commit{})
				s, err := h.store.Commit(bg, exe, execstore.Commit{Emits: []execstore.Emit{
					{TargetID: "t", Event: []byte("1")}, {TargetID: "t", Event: []byte("2")}, {TargetID: "t", Event: []byte("3")}}})
				require.NoError(t, err)
				seqs[id] = s
			}
			require.NoError(t, h.store.AckOutbox(bg, "b", seqs["b"][0]))
			log := &commandLog{}
			env := watchedEnv(t, h, profile, log)
			for _, id := range []string{"a", "b"} {
				log.reset()
				writes := []opsrun.IdempotentWrite{opsrun.OutboxAckWrite(id, seqs[id][0]), opsrun.OutboxAckWrite(id, seqs[id][1])}
				for i, err := range opsrun.DocumentWrites(bg, env, writes, 128) {
					require.NoError(t, err, "%s: write %d", id, i)
				}
				qs, _ := updateStatements(t, log)
				switch {
				case profile == server.FerretDB:
					assert.Equal(t, []string{"update"}, log.snapshot(), id)
				case id == "a":
					assert.Equal(t, []string{"update"}, log.snapshot(), "one write")
					require.Len(t, qs, 1, "one statement")
					elems, err := qs[0].Elements()
					require.NoError(t, err)
					assert.Len(t, elems, 3, "_id and both guards")
				default:
					assert.Equal(t, []string{"update", "update"}, log.snapshot(), "the shared statement, then one each")
					assert.Len(t, qs, 2, "the second: a statement each")
				}
				stored, n := outboxOf(t, h, id)
				assert.Equal(t, []int64{seqs[id][2]}, stored, id)
				assert.EqualValues(t, 1, n, "%s's count", id)
			}
		})
	}
}

// A document's writes that go alone together with its timer delete among them remove the
// timer hint too when that timer is the execution's last (the MongoDB profile: one update of
// two statements, the last-timer form applied), and keep it, with the other timer, when
// another is stored beside it (the second form applied). Either way every write is applied.
func TestDocumentWritesRemoveTheLastTimersHint(t *testing.T) {
	h := newHarness(t, aio.Options{DisableAckCarrying: true})
	seqs := map[string][]int64{}
	for _, id := range []string{"alone", "besides"} {
		exe := newExe(id)
		timers := []execstore.TimerOp{execstore.ScheduleTimer("p", unixAt(10))}
		if id == "besides" {
			timers = append(timers, execstore.ScheduleTimer("q", unixAt(900)))
		}
		s, err := h.store.Commit(bg, exe, execstore.Commit{Timers: timers, Emits: []execstore.Emit{{TargetID: "t", Event: []byte("1")}}})
		require.NoError(t, err)
		seqs[id] = s
	}
	log := &commandLog{}
	env := watchedEnv(t, h, server.MongoDB, log)
	for _, id := range []string{"alone", "besides"} {
		log.reset()
		writes := []opsrun.IdempotentWrite{opsrun.OutboxAckWrite(id, seqs[id][0]), opsrun.DeleteTimerWrite(id, "p", unixAt(10), 0)}
		for i, err := range opsrun.DocumentWrites(bg, env, writes, 128) {
			require.NoError(t, err, "%s: write %d", id, i)
		}
		assert.Equal(t, []string{"update"}, log.snapshot(), "%s: one write", id)
		qs, _ := updateStatements(t, log)
		assert.Len(t, qs, 2, "%s: the last-timer form, then the other", id)
		stored, n := outboxOf(t, h, id)
		assert.Empty(t, stored, id)
		assert.Zero(t, n, id)
		_, hintErr := h.rawDoc(t, id).LookupErr("timer_min")
		if id == "alone" {
			assert.Error(t, hintErr, "the last timer's delete left the hint")
		} else {
			assert.NoError(t, hintErr, "a hint removed while a timer is left")
		}
	}
	left, err := h.store.DueTimers(bg, unixAt(1000), 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "besides", Path: "q", FireAt: unixAt(900), Version: 1}}, left)
}
