package storetest

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// deadBehaviours lists what Run checks of a store that implements execstore.DeadLetters.
var deadBehaviours = []behaviour[execstore.DeadLetters]{
	{"FailRecordsAttemptsWithThePendingItem", failRecordsAttempts},
	{"DeadItemLeavesThePendingOnes", deadLeavesPending},
	{"FailOfAnItemNotPendingWritesNothing", failNotPending},
	{"ReviveIsIdempotent", reviveIdempotent},
	{"ReviveOfATimerWhosePathIsArmedIsAConflict", reviveTimerConflict},
	{"ReviveMovesTheVersionOn", reviveMovesVersion},
	{"DiscardDropsTheDeadItemOnce", discardOnce},
	{"FailStopsAtMaxAttempts", failStopsAtMaxAttempts},
	{"ConcurrentFailsStopAtMaxAttempts", concurrentFailsStopAtMax},
	{"ListDeadFiltersAndPages", listDeadPages},
	{"DeadLettersRefuseBadInput", deadBadInput},
}

// RunDeadLetters checks a store that implements execstore.DeadLetters: failures recorded
// with the pending items, dead items out of every pending scan and listed with what they
// were, their execution's later items still pending, Fail of an item no longer pending and
// Revive of an item not dead writing nothing, a dead timer whose path was armed again staying
// dead, Revive moving the execution's version on (a commit at the version before is a
// conflict), Failure.MaxAttempts moving an item to dead in the write that reaches it, never
// past it under concurrent calls, Discard dropping a dead item once (and nothing that is not dead),
// listing with filters and cursors, and bad input refused. For a store that is also an
// execstore.DeadCounting, it checks the counts by partition too. open must return a new,
// empty store each time it is called, and release it with t.Cleanup. Run runs it already
// for stores that are DeadLetters.
func RunDeadLetters(t *testing.T, open func(t *testing.T) execstore.DeadLetters) {
	t.Helper()
	runEach(t, deadBehaviours, open)
	if _, ok := open(t).(execstore.DeadCounting); ok {
		t.Run("CountDeadInCountsByPartition", func(t *testing.T) { countDeadIn(t, open(t).(execstore.DeadCounting)) })
	}
}

// runDeadLetters runs RunDeadLetters when the stores open makes are DeadLetters.
func runDeadLetters(t *testing.T, open func(t *testing.T) execstore.Store) {
	t.Helper()
	runIf(t, open, RunDeadLetters)
}

// failAt is a failure's time: whole milliseconds, as every store keeps them.
var failAt = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

// failRecordsAttempts: each Fail adds one attempt to the pending item, with its text and
// time, and the pending scans return them; the item stays pending.
func failRecordsAttempts(t *testing.T, s execstore.DeadLetters) {
	exe := newExe("dl-attempts")
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("e")}},
		Spawns: []execstore.Spawn{{ChildID: "c", RootPath: "A"}}, Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
	long := strings.Repeat("é", execstore.MaxFailureBytes) // 2 bytes a rune: cut on a boundary
	for i, f := range []execstore.Failure{{Error: "first", At: failAt}, {Error: long, At: failAt.Add(time.Second)}} {
		a, ok, err := s.Fail(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]}, f)
		require.NoError(t, err)
		require.True(t, ok)
		assert.Equal(t, i+1, a.Count)
	}
	p, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, p, 1)
	assert.Equal(t, 2, p[0].Attempts.Count)
	assert.Equal(t, strings.Repeat("é", execstore.MaxFailureBytes/2), p[0].Attempts.LastError)
	assert.True(t, p[0].Attempts.LastAt.Equal(failAt.Add(time.Second)))

	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	_, ok, err := s.Fail(bg, execstore.ItemRef{Kind: execstore.SpawnItem, ExecutionID: exe.ID, Seq: spawns[0].Seq},
		execstore.Failure{Error: "no", At: failAt})
	require.NoError(t, err)
	require.True(t, ok)
	spawns, err = s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, spawns[0].Attempts.Count)

	due, err := s.DueTimers(bg, fire, 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	_, ok, err = s.Fail(bg, execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: due[0].FireAt},
		execstore.Failure{Error: "late", At: failAt})
	require.NoError(t, err)
	require.True(t, ok)
	due, err = s.DueTimers(bg, fire, 0)
	require.NoError(t, err)
	assert.Equal(t, 1, due[0].Attempts.Count)
	assert.Equal(t, "late", due[0].Attempts.LastError)

	got, err := s.Load(bg, exe.ID)
	require.NoError(t, err)
	assert.Equal(t, exe.Version, got.Version, "a failure is no commit")
}

// deadLeavesPending: a dead item is in no pending scan, its execution's later items are, and
// ListDead returns it with what it was and its attempts. A commit after it keeps it dead.
func deadLeavesPending(t *testing.T, s execstore.DeadLetters) {
	exe := newExe("dl-dead")
	first := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("one")}}})
	was, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, was, 1)
	later := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("two")}}})
	ref := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: first[0]}
	_, _, err = s.Fail(bg, ref, execstore.Failure{Error: "bad", At: failAt})
	require.NoError(t, err)
	a, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "worse", At: failAt.Add(time.Second), Dead: true})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 2, a.Count)
	p, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, p, 1)
	assert.Equal(t, later[0], p[0].Seq)
	if ps, ok := s.(execstore.Partitioned); ok {
		p, err := ps.PendingOutboxIn(bg, []int{execstore.PartitionOf(exe.ID, ps.Partitions())}, 0)
		require.NoError(t, err)
		require.Len(t, p, 1)
	}
	mustCommit(t, s, exe, execstore.Commit{})
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	d := page.Items[0]
	assert.Equal(t, ref, d.ItemRef)
	assert.Equal(t, "t", d.TargetID)
	assert.Equal(t, []byte("one"), d.Event)
	assert.Equal(t, int64(1), d.Version)
	assert.Equal(t, 2, d.Count)
	assert.Equal(t, "worse", d.LastError)
	assert.True(t, d.DeadAt.Equal(failAt.Add(time.Second)))
	assert.False(t, d.CommittedAt.IsZero(), "a dead entry keeps when it was committed")
	assert.True(t, d.CommittedAt.Equal(was[0].CommittedAt), "dead item committed at %s, the pending entry at %s",
		d.CommittedAt, was[0].CommittedAt)
	counts, err := s.CountDead(bg)
	require.NoError(t, err)
	assert.Equal(t, map[execstore.ItemKind]int64{execstore.OutboxItem: 1}, counts)
}

// failNotPending: Fail of an acked entry, an unknown one, one already dead, and a timer
// re-armed or cancelled since reports false and writes nothing.
func failNotPending(t *testing.T, s execstore.DeadLetters) {
	exe := newExe("dl-gone")
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}, {Event: []byte("b")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
	require.NoError(t, s.AckOutbox(bg, exe.ID, seqs[0]))
	f := execstore.Failure{Error: "x", At: failAt, Dead: true}
	for _, ref := range []execstore.ItemRef{
		{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[1] + 1000},
		{Kind: execstore.OutboxItem, ExecutionID: "dl-nobody", Seq: seqs[1]},
		{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire.Add(time.Second)},
		{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "q", FireAt: fire},
	} {
		_, ok, err := s.Fail(bg, ref, f)
		require.NoError(t, err)
		assert.False(t, ok, "%+v", ref)
	}
	dead := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[1]}
	_, ok, err := s.Fail(bg, dead, f)
	require.NoError(t, err)
	require.True(t, ok)
	_, ok, err = s.Fail(bg, dead, f)
	require.NoError(t, err)
	assert.False(t, ok, "already dead")
	mustCommit(t, s, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire.Add(time.Hour))}})
	_, ok, err = s.Fail(bg, execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire}, f)
	require.NoError(t, err)
	assert.False(t, ok, "re-armed since")
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	assert.Len(t, page.Items, 1)
	due, err := s.DueTimers(bg, fire.Add(time.Hour), 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.Zero(t, due[0].Attempts)
}

// reviveIdempotent: Revive puts a dead entry back under its seq with no attempts, and a dead
// timer back at its fire time; a second Revive reports false.
func reviveIdempotent(t *testing.T, s execstore.DeadLetters) {
	exe := newExe("dl-revive")
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("a")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
	was, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, was, 1)
	refs := []execstore.ItemRef{
		{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire},
	}
	for _, ref := range refs {
		_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, Dead: true})
		require.NoError(t, err)
		require.True(t, ok)
	}
	for _, ref := range refs {
		ok, err := s.Revive(bg, ref)
		require.NoError(t, err)
		assert.True(t, ok)
		ok, err = s.Revive(bg, ref)
		require.NoError(t, err)
		assert.False(t, ok, "revived already")
	}
	p, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, p, 1)
	assert.Equal(t, seqs[0], p[0].Seq)
	assert.Equal(t, []byte("a"), p[0].Event)
	assert.Zero(t, p[0].Attempts)
	assert.True(t, p[0].CommittedAt.Equal(was[0].CommittedAt), "revived entry committed at %s, before at %s",
		p[0].CommittedAt, was[0].CommittedAt)
	due, err := s.DueTimers(bg, fire, 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.True(t, due[0].FireAt.Equal(fire))
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
}

// discardOnce: Discard drops a dead entry and a dead timer for good, without moving the
// execution's version; a second Discard, a Discard of an item that is pending, and a
// Discard naming a dead timer at another fire time report false and change nothing.
func discardOnce(t *testing.T, s execstore.DeadLetters) {
	exe := newExe("dl-discard")
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("a")}, {TargetID: "t", Event: []byte("b")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
	dead := []execstore.ItemRef{
		{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire},
	}
	for _, ref := range dead {
		_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, Dead: true})
		require.NoError(t, err)
		require.True(t, ok)
	}
	before, err := s.Load(bg, exe.ID)
	require.NoError(t, err)

	pending := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[1]}
	ok, err := s.Discard(bg, pending)
	require.NoError(t, err)
	assert.False(t, ok, "a pending entry is not dead")
	ok, err = s.Discard(bg, execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire.Add(time.Second)})
	require.NoError(t, err)
	assert.False(t, ok, "the dead timer fires at another time")
	ok, err = s.Discard(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: "dl-nowhere", Seq: 1})
	require.NoError(t, err)
	assert.False(t, ok, "no such execution")

	for _, ref := range dead {
		ok, err := s.Discard(bg, ref)
		require.NoError(t, err)
		assert.True(t, ok, "%s", ref)
		ok, err = s.Discard(bg, ref)
		require.NoError(t, err)
		assert.False(t, ok, "%s discarded already", ref)
		ok, err = s.Revive(bg, ref)
		require.NoError(t, err)
		assert.False(t, ok, "%s discarded: nothing to revive", ref)
	}
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
	counts, err := s.CountDead(bg)
	require.NoError(t, err)
	assert.Empty(t, counts)
	after, err := s.Load(bg, exe.ID)
	require.NoError(t, err)
	assert.Equal(t, before.Version, after.Version, "a discard moves no version")
	p, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, p, 1, "the pending entry stays")
	assert.Equal(t, seqs[1], p[0].Seq)
	due, err := s.DueTimers(bg, fire.Add(time.Hour), 0)
	require.NoError(t, err)
	assert.Empty(t, due)
	_, err = s.Discard(bg, execstore.ItemRef{Kind: "bogus", ExecutionID: exe.ID})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
}

// reviveTimerConflict: a dead timer whose path was armed again stays dead, and Revive says
// so with an error matching ErrConflict.
func reviveTimerConflict(t *testing.T, s execstore.DeadLetters) {
	exe := newExe("dl-conflict")
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	mustCommit(t, s, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
	ref := execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire}
	_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, Dead: true})
	require.NoError(t, err)
	require.True(t, ok)
	mustCommit(t, s, exe, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire.Add(time.Hour))}})
	ok, err = s.Revive(bg, ref)
	assert.False(t, ok)
	assert.True(t, errors.Is(err, execstore.ErrConflict), "%v", err)
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	assert.Len(t, page.Items, 1)
}

// listDeadPages: ListDead filters by kind and execution, and pages with cursors in order.
func listDeadPages(t *testing.T, s execstore.DeadLetters) {
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var want []execstore.ItemRef
	for _, id := range []string{"dl-b", "dl-a"} {
		exe := newExe(id)
		seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("1")}, {Event: []byte("2")}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
		for _, ref := range []execstore.ItemRef{
			{Kind: execstore.TimerItem, ExecutionID: id, Path: "p", FireAt: fire},
			{Kind: execstore.OutboxItem, ExecutionID: id, Seq: seqs[1]},
			{Kind: execstore.OutboxItem, ExecutionID: id, Seq: seqs[0]},
		} {
			_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, Dead: true})
			require.NoError(t, err)
			require.True(t, ok)
		}
		want = append(want, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: id, Seq: seqs[0]},
			execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: id, Seq: seqs[1]},
			execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: id, Path: "p", FireAt: fire})
	}
	want = append(want[3:], want[:3]...) // dl-a first
	var got []execstore.ItemRef
	q := execstore.DeadQuery{Limit: 2}
	for pages := 0; ; pages++ {
		require.Less(t, pages, 10)
		page, err := s.ListDead(bg, q)
		require.NoError(t, err)
		for _, d := range page.Items {
			got = append(got, d.ItemRef)
		}
		if page.NextCursor == "" {
			break
		}
		q.Cursor = page.NextCursor
	}
	assert.Equal(t, want, got)
	page, err := s.ListDead(bg, execstore.DeadQuery{Kinds: []execstore.ItemKind{execstore.TimerItem}, ExecutionID: "dl-b"})
	require.NoError(t, err)
	require.Len(t, page.Items, 1)
	assert.Equal(t, want[5], page.Items[0].ItemRef)
	counts, err := s.CountDead(bg)
	require.NoError(t, err)
	assert.Equal(t, map[execstore.ItemKind]int64{execstore.OutboxItem: 4, execstore.TimerItem: 2}, counts)
}

// deadBadInput: bad refs, failures and queries are ErrInvalid before any I/O.
func deadBadInput(t *testing.T, s execstore.DeadLetters) {
	good := execstore.Failure{Error: "x", At: failAt}
	for _, ref := range []execstore.ItemRef{
		{Kind: "job", ExecutionID: "x", Seq: 1},
		{Kind: execstore.OutboxItem, Seq: 1},
		{Kind: execstore.TimerItem, ExecutionID: "x", FireAt: failAt},
		{Kind: execstore.TimerItem, ExecutionID: "x", Path: "p"},
	} {
		_, _, err := s.Fail(bg, ref, good)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%+v", ref)
		_, err = s.Revive(bg, ref)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%+v", ref)
	}
	_, _, err := s.Fail(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: "x", Seq: 1}, execstore.Failure{Error: "x"})
	assert.ErrorIs(t, err, execstore.ErrInvalid, "a failure without a time")
	for _, q := range []execstore.DeadQuery{{Limit: -1}, {Limit: 10001}, {Cursor: "nonsense"}, {Kinds: []execstore.ItemKind{"job"}}} {
		_, err := s.ListDead(bg, q)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%+v", q)
	}
}

// countDeadIn: the dead items of every kind are counted by partition, only in the
// partitions asked for; an empty list counts nothing, and a partition out of range is
// ErrInvalid.
func countDeadIn(t *testing.T, s execstore.DeadCounting) {
	n := s.Partitions()
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	want := map[int]int64{}
	for i := range 6 {
		id := "dl-count-" + string(rune('a'+i))
		exe := newExe(id)
		seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("1")}, {Event: []byte("2")}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
		refs := []execstore.ItemRef{{Kind: execstore.OutboxItem, ExecutionID: id, Seq: seqs[0]}}
		if i%2 == 0 {
			refs = append(refs, execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: id, Path: "p", FireAt: fire})
		}
		for _, ref := range refs {
			_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, Dead: true})
			require.NoError(t, err)
			require.True(t, ok)
			want[execstore.PartitionOf(id, n)]++
		}
	}
	all := make([]int, n)
	for p := range all {
		all[p] = p
	}
	got, err := s.CountDeadIn(bg, all)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	for p, c := range want {
		got, err := s.CountDeadIn(bg, []int{p})
		require.NoError(t, err)
		assert.Equal(t, map[int]int64{p: c}, got, "partition %d alone", p)
	}
	got, err = s.CountDeadIn(bg, nil)
	require.NoError(t, err)
	assert.Empty(t, got)
	for _, bad := range [][]int{{-1}, {n}} {
		_, err := s.CountDeadIn(bg, bad)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%v", bad)
	}
}

// reviveMovesVersion: Fail leaves the execution's version alone; each Revive moves it on by
// one, so a commit made at the version read before it is a conflict, and Load and
// LoadForEvent (a cache's answer included) return the new version; a revived timer keeps its
// arming version.
func reviveMovesVersion(t *testing.T, s execstore.DeadLetters) {
	exe := newExe("dl-revive-version")
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("e1")}},
		Spawns: []execstore.Spawn{{ChildID: "c", RootPath: "A"}}, Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
	spawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	require.Len(t, spawns, 1)
	refs := []execstore.ItemRef{
		{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		{Kind: execstore.SpawnItem, ExecutionID: exe.ID, Seq: spawns[0].Seq},
		{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire},
	}
	for _, ref := range refs {
		_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, Dead: true})
		require.NoError(t, err)
		require.True(t, ok)
	}
	version := func() int64 {
		got, err := s.Load(bg, exe.ID)
		require.NoError(t, err)
		return got.Version
	}
	require.EqualValues(t, 1, version(), "moving items to dead is no commit")
	warm, _, err := s.LoadForEvent(bg, exe.ID, "ev") // a store with a cache now holds version 1
	require.NoError(t, err)
	require.EqualValues(t, 1, warm.Version)
	for i, ref := range refs {
		ok, err := s.Revive(bg, ref)
		require.NoError(t, err)
		require.True(t, ok)
		assert.EqualValues(t, 2+i, version(), "revived %s: the version moves on", ref.Kind)
		ok, err = s.Revive(bg, ref)
		require.NoError(t, err)
		require.False(t, ok)
		assert.EqualValues(t, 2+i, version(), "a revival that writes nothing moves nothing")
	}
	loaded, _, err := s.LoadForEvent(bg, exe.ID, "ev")
	require.NoError(t, err)
	assert.EqualValues(t, 4, loaded.Version, "LoadForEvent after the revivals through this store")
	stale := *exe
	_, err = s.Commit(bg, &stale, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("e2")}}})
	var conflict *execstore.ConflictError
	require.ErrorAs(t, err, &conflict, "a commit at the version read before the revivals")
	assert.EqualValues(t, 1, conflict.Expected)
	assert.EqualValues(t, 4, conflict.Found)
	assert.EqualValues(t, 1, stale.Version)
	due, err := s.DueTimers(bg, fire, 0)
	require.NoError(t, err)
	require.Len(t, due, 1)
	assert.EqualValues(t, 1, due[0].Version, "the revived timer is the arming it was")
	fresh, err := s.Load(bg, exe.ID)
	require.NoError(t, err)
	mustCommit(t, s, fresh, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("e2")}}})
	assert.EqualValues(t, 5, fresh.Version)
	p, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	require.Len(t, p, 2)
	assert.Equal(t, []byte("e1"), p[0].Event, "the revived entry keeps its place")
}

// failStopsAtMaxAttempts: with MaxAttempts, the failure that brings the attempts to it moves
// the item to dead in its write, and says so by its count; one that finds more recorded
// already (failures recorded without it) moves it too; Dead still moves it at once; a
// negative MaxAttempts is refused.
func failStopsAtMaxAttempts(t *testing.T, s execstore.DeadLetters) {
	exe := newExe("dl-max")
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}, {Event: []byte("b")}, {Event: []byte("c")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
	for _, ref := range []execstore.ItemRef{
		{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire},
	} {
		for i := 1; i <= 3; i++ {
			a, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, MaxAttempts: 3})
			require.NoError(t, err)
			require.True(t, ok, "%s failure %d", ref.Kind, i)
			assert.Equal(t, i, a.Count)
		}
		_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, MaxAttempts: 3})
		require.NoError(t, err)
		assert.False(t, ok, "%s: dead after the third failure", ref.Kind)
	}
	past := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[1]}
	for range 2 {
		_, ok, err := s.Fail(bg, past, execstore.Failure{Error: "x", At: failAt})
		require.NoError(t, err)
		require.True(t, ok)
	}
	a, ok, err := s.Fail(bg, past, execstore.Failure{Error: "x", At: failAt, MaxAttempts: 2})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 3, a.Count, "past MaxAttempts already: this one moves it")
	at := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[2]}
	a, ok, err = s.Fail(bg, at, execstore.Failure{Error: "x", At: failAt, MaxAttempts: 5, Dead: true})
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, 1, a.Count)
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	assert.Len(t, page.Items, 4)
	p, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Empty(t, p)
	due, err := s.DueTimers(bg, fire, 0)
	require.NoError(t, err)
	assert.Empty(t, due)
	for _, d := range page.Items {
		want := map[int64]int{seqs[0]: 3, seqs[1]: 3, seqs[2]: 1}[d.Seq]
		if d.Kind == execstore.TimerItem {
			want = 3
		}
		assert.Equal(t, want, d.Count, "%+v", d.ItemRef)
	}
	_, _, err = s.Fail(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		execstore.Failure{Error: "x", At: failAt, MaxAttempts: -1})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
}

// concurrentFailsStopAtMax: callers that record failures of one item at once (relays
// without a lease), each from whatever count it read, never record more than MaxAttempts:
// the calls that wrote got the counts 1 to MaxAttempts once each, the one that got
// MaxAttempts moved the item to dead, and the others found it not pending. A call may give
// up under contention with an error matching ErrRolledBack, having written nothing.
func concurrentFailsStopAtMax(t *testing.T, s execstore.DeadLetters) {
	const maxAttempts, callers = 3, 8
	exe := newExe("dl-max-race")
	fire := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	seqs := mustCommit(t, s, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("p", fire)}})
	for _, ref := range []execstore.ItemRef{
		{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "p", FireAt: fire},
	} {
		var mu sync.Mutex
		var counts []int
		for round := 0; ; round++ {
			require.Less(t, round, 20, "%s: still pending after %d rounds of %d failures", ref.Kind, round, callers)
			var wg sync.WaitGroup
			gone := false
			start := make(chan struct{})
			for range callers {
				wg.Go(func() {
					<-start
					a, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "x", At: failAt, MaxAttempts: maxAttempts})
					mu.Lock()
					defer mu.Unlock()
					switch {
					case err != nil:
						assert.ErrorIs(t, err, execstore.ErrRolledBack, "%s", ref.Kind)
					case ok:
						counts = append(counts, a.Count)
					default:
						gone = true
					}
				})
			}
			close(start)
			wg.Wait()
			if gone {
				break
			}
		}
		slices.Sort(counts)
		assert.Equal(t, []int{1, 2, 3}, counts, "%s: each count written once, none past MaxAttempts", ref.Kind)
		page, err := s.ListDead(bg, execstore.DeadQuery{Kinds: []execstore.ItemKind{ref.Kind}, ExecutionID: exe.ID})
		require.NoError(t, err)
		require.Len(t, page.Items, 1, "%s moved to dead", ref.Kind)
		assert.Equal(t, maxAttempts, page.Items[0].Count)
	}
}
