package aio_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/server"
)

// What the store keeps in the stored document, read back raw: the document model, the trace
// ring, the dedupe window and the sweep's timer hint stay within their bounds on every server.

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
	for _, profile := range []server.Profile{server.MongoDB, server.FerretDB} {
		t.Run(string(profile), func(t *testing.T) { testTimerHint(t, profile) })
	}
}

// testTimerHint runs TestTimerHint with the profile forced: its commits and sweeps use no
// operator that either server lacks.
func testTimerHint(t *testing.T, profile server.Profile) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Profile: profile}})
	e := newExe("e")
	_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("A", unixAt(100)), execstore.ScheduleTimer("B", unixAt(300))}})
	require.NoError(t, err)
	assert.EqualValues(t, 100, h.rawDoc(t, "e").Lookup("timer_min").Double())
	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("A")}})
	require.NoError(t, err)
	assert.EqualValues(t, 100, h.rawDoc(t, "e").Lookup("timer_min").Double(), "a cancel never raises the hint")

	d, err := h.store.DueTimers(bg, unixAt(200), 0)
	require.NoError(t, err)
	assert.Empty(t, d)
	if profile == server.FerretDB {
		assert.EqualValues(t, 100, h.rawDoc(t, "e").Lookup("timer_min").Double(), "the stale hint is left")
	} else {
		assert.EqualValues(t, 300, h.rawDoc(t, "e").Lookup("timer_min").Double(), "the stale hint is repaired")
	}

	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("C", unixAt(50))}})
	require.NoError(t, err)
	d, err = h.store.DueTimers(bg, unixAt(400), 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "C", FireAt: unixAt(50), Version: 3}, {ExecutionID: "e", Path: "B", FireAt: unixAt(300), Version: 1}}, d)

	for _, x := range d {
		removed, err := h.store.DeleteTimer(bg, x.ExecutionID, x.Path, x.FireAt)
		require.NoError(t, err)
		assert.True(t, removed)
	}
	d, err = h.store.DueTimers(bg, unixAt(1000), 0)
	require.NoError(t, err)
	assert.Empty(t, d)
	if profile != server.FerretDB {
		_, err = h.rawDoc(t, "e").LookupErr("timer_min")
		assert.Error(t, err, "no timer left: no hint")
	}
	d, err = h.store.DueTimers(bg, unixAt(1000), 0)
	require.NoError(t, err)
	assert.Empty(t, d, "a stale hint brings back no timer")
}

// DeleteTimers sends a sweep's timers in one bulk write.
func TestDeleteTimersIsOneBulkWrite(t *testing.T) {
	h := newHarness(t, aio.Options{})
	for i := range 10 {
		e := newExe(fmt.Sprintf("e%d", i))
		_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", unixAt(float64(i)))}})
		require.NoError(t, err)
	}
	due, err := h.store.DueTimers(bg, unixAt(50), 0)
	require.NoError(t, err)
	require.Len(t, due, 10)
	h.cmds.reset()
	require.NoError(t, h.store.DeleteTimers(bg, due))
	assert.Equal(t, []string{"update"}, h.cmds.snapshot(), "one bulk write")
	left, err := h.store.DueTimers(bg, unixAt(1000), 0)
	require.NoError(t, err)
	assert.Empty(t, left)
}

// DeleteTimers of an execution's last timer removes its hint too, on the MongoDB profile, so
// that no sweep has to repair it; beside another timer, the hint stays and the other timer
// is kept. The FerretDB profile leaves every hint as it is (its sweep reads every document).
func TestDeleteTimersOfTheLastTimerRemoveTheHint(t *testing.T) {
	h := newHarness(t, aio.Options{})
	alone, besides := newExe("alone"), newExe("besides")
	_, err := h.store.Commit(bg, alone, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", unixAt(10))}})
	require.NoError(t, err)
	_, err = h.store.Commit(bg, besides, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("a.b", unixAt(10)), execstore.ScheduleTimer("c", unixAt(900))}})
	require.NoError(t, err)
	due, err := h.store.DueTimers(bg, unixAt(50), 0)
	require.NoError(t, err)
	require.Len(t, due, 2)
	require.NoError(t, h.store.DeleteTimers(bg, due))

	hint := func(id string) (float64, bool) {
		v, err := h.rawDoc(t, id).LookupErr("timer_min")
		if err != nil {
			return 0, false
		}
		return v.Double(), true
	}
	at, ok := hint("alone")
	if h.store.Server().Profile == server.MongoDB {
		assert.False(t, ok, "the last timer's delete left the hint %v", at)
	} else {
		assert.True(t, ok, "the FerretDB profile keeps the hint")
	}
	at, ok = hint("besides")
	assert.True(t, ok, "a hint removed while a timer is left")
	assert.LessOrEqual(t, at, 900.0, "the hint is never late")
	left, err := h.store.DueTimers(bg, unixAt(1000), 0)
	require.NoError(t, err)
	require.Len(t, left, 1)
	assert.Equal(t, execstore.DueTimer{ExecutionID: "besides", Path: "c", FireAt: unixAt(900), Version: 1}, left[0])

	// The last timer's path re-armed at the same fire time comes due again, and goes again.
	_, err = h.store.Commit(bg, alone, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("a.b", unixAt(10))}})
	require.NoError(t, err)
	due, err = h.store.DueTimers(bg, unixAt(50), 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "alone", Path: "a.b", FireAt: unixAt(10), Version: 2}}, due)
}

// With a dedupe window the stored set stays bounded by twice the window, on either profile's
// formulation (the window's semantics are in storetest).
func TestDedupeWindowBoundedInStorage(t *testing.T) {
	for _, profile := range []server.Profile{server.Detect, server.FerretDB} {
		t.Run(fmt.Sprintf("profile=%v", profile), func(t *testing.T) {
			const window, events = 3, 14
			h := newHarness(t, aio.Options{DedupeWindow: window, Connection: server.Connection{Profile: profile}})
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
	_, err := h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("C", unixAt(50))}})
	require.NoError(t, err)
	removed, err := h.store.DeleteTimer(bg, "e", "C", unixAt(50))
	require.NoError(t, err)
	require.True(t, removed)
	// The sweep reads the document now: no timer, hint 50 at this version...
	readVersion := e.Version
	// ...a commit schedules P@200 (the hint stays 50: $min)...
	_, err = h.store.Commit(bg, e, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("P", unixAt(200))}})
	require.NoError(t, err)
	// ...and the sweep's repair, computed from what it read, arrives late.
	filter, update := opsrun.RepairHintCommand("e", readVersion, 50, map[string]float64{})
	res, err := h.db.Collection("executions").UpdateOne(bg, filter, update)
	require.NoError(t, err)
	assert.Zero(t, res.MatchedCount, "a stale repair applied")
	due, err := h.store.DueTimers(bg, unixAt(1000), 0)
	require.NoError(t, err)
	assert.Equal(t, []execstore.DueTimer{{ExecutionID: "e", Path: "P", FireAt: unixAt(200), Version: e.Version}}, due)
}

// unixAt is a fire time given in seconds since the Unix epoch.
func unixAt(seconds float64) time.Time { return time.Unix(0, int64(seconds*1e9)).UTC() }
