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

// updateStatements returns the statements of the first update command log has, and whether
// each is an updateMany.
func updateStatements(t *testing.T, log *commandLog) (qs []bson.Raw, multi []bool) {
	t.Helper()
	cmd := log.first("update")
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
// of an entry already gone changes nothing. On the MongoDB profile a document's acks share
// one updateOne; as one statement (c's, whose entry is gone) matched nothing, the shared
// ones are sent again alone, which changes nothing more. Both leave the same documents.
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
				assert.Equal(t, []bool{false, false, false}, multi, "one updateOne a document")
				var guards []int
				for _, q := range qs {
					elems, err := q.Elements()
					require.NoError(t, err)
					guards = append(guards, len(elems)-1)
				}
				assert.Equal(t, []int{1, 2, 1}, guards, "b's two acks in one statement")
				names := log.snapshot()
				assert.Equal(t, []string{"update", "update", "update"}, names, "b's acks sent again alone")
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
		writes = append(writes, opsrun.DeleteTimerWrite(id, "T", unixAt(1)))
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

	mixed := []opsrun.IdempotentWrite{opsrun.DeleteTimerWrite("x", "U", unixAt(2)), opsrun.DeleteTimerWrite("y", "T", unixAt(1)), opsrun.DeleteTimerWrite("z", "T", unixAt(5))}
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
