package aio

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/ops"
)

// endSink keeps the last Committed it was handed.
type endSink struct{ last *wake.Committed }

func (k *endSink) Begin(string) any                       { return nil }
func (k *endSink) End(_ string, _ any, c *wake.Committed) { k.last = c }

// With no sink subscribed, a commit's Begin and End on its note allocate nothing; with one,
// the won commit hands over what it writes.
func TestHandOffWithoutSinksAllocatesNothing(t *testing.T) {
	s := &Store{signal: &wake.Signal{}}
	exe := existing("x")
	c := execstore.Commit{
		Emits:  []execstore.Emit{{TargetID: "t", Event: []byte("e")}},
		Spawns: []execstore.Spawn{{ChildID: "c", RootPath: "F.A"}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", time.Unix(1e9, 1))},
	}
	at := time.Date(2026, 12, 4, 10, 0, 0, 5e6, time.UTC)
	seqs := ops.Seqs{Outbox: []int64{7}, Spawns: []int64{8}, At: at}
	commit := func() wakeNote {
		n := noteOf(&c)
		s.begin(&n, exe, &c, seqs)
		n.end(true)
		return n
	}
	assert.Zero(t, testing.AllocsPerRun(1000, func() { commit() }))
	assert.Nil(t, commit().wrote, "nothing is worked out for no one")

	sink := &endSink{}
	defer s.signal.Subscribe(sink)()
	commit()
	require.NotNil(t, sink.last)
	assert.Equal(t, "x", sink.last.ExecutionID)
	assert.EqualValues(t, 4, sink.last.Version)
	assert.Equal(t, []execstore.OutboxEntry{{Seq: 7, SourceID: "x", Version: 4, TargetID: "t", Event: []byte("e"), CommittedAt: at}}, sink.last.Outbox)
	assert.Equal(t, []execstore.SpawnEntry{{Seq: 8, ParentID: "x", ChildID: "c", RootPath: "F.A", Context: map[string]any{}, CommittedAt: at}}, sink.last.Spawns)
	require.Len(t, sink.last.Timers, 1)
	assert.Equal(t, time.Unix(1e9, 0).UTC(), sink.last.Timers[0].FireAt, "the fire time as the store holds it")
}
