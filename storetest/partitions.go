package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// partitionedBehaviours lists what Run checks of a store that implements
// execstore.Partitioned.
var partitionedBehaviours = []behaviour[execstore.Partitioned]{
	{"PartitionedScansAreTheWholeScanRestricted", partitionedScans},
	{"BadPartitionsAreInvalid", badPartitions},
	{"NoPartitionsScanNothing", noPartitions},
}

// RunPartitioned checks a store that implements execstore.Partitioned: that a scan of some
// partitions is the whole scan restricted to them, in the same order, with and without a
// limit; that a partition out of range is refused with execstore.ErrInvalid; and that a scan
// of no partition returns nothing. open must return a new, empty store each time it is
// called, and release it with t.Cleanup. Run runs it already for stores that are
// Partitioned; call it to check a store with another number of partitions.
func RunPartitioned(t *testing.T, open func(t *testing.T) execstore.Partitioned) {
	t.Helper()
	runEach(t, partitionedBehaviours, open)
}

// runPartitioned runs RunPartitioned when the stores open makes are Partitioned.
func runPartitioned(t *testing.T, open func(t *testing.T) execstore.Store) {
	t.Helper()
	runIf(t, open, RunPartitioned)
}

// partitionedScans commits entries, spawns and timers on executions spread over the
// partitions, in interleaved rounds. Then each scan of some partitions returns exactly the
// whole scan's result restricted to them, in the same order, with and without a limit. A
// partition named twice counts once, and all the partitions together are the whole scan.
func partitionedScans(t *testing.T, s execstore.Partitioned) {
	n := s.Partitions()
	require.Positive(t, n)
	exes := make([]*execstore.Execution, 24)
	for i := range exes {
		exes[i] = newExe(fmt.Sprintf("part-%02d", i))
	}
	for round := range 2 {
		for i, e := range exes {
			_, err := s.Commit(bg, e, execstore.Commit{
				Emits:  []execstore.Emit{{Event: []byte(fmt.Sprint(round, "a"))}, {Event: []byte(fmt.Sprint(round, "b"))}},
				Spawns: []execstore.Spawn{{ChildID: fmt.Sprint(e.ID, "/", round), RootPath: "R"}},
				Timers: []execstore.TimerOp{execstore.ScheduleTimer(fmt.Sprint("T", round), at(float64(100+(i*7+round*13)%50)))},
			})
			require.NoError(t, err)
		}
	}
	of := func(id string) int { return execstore.PartitionOf(id, n) }
	allOutbox, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	allSpawns, err := s.PendingSpawns(bg, 0)
	require.NoError(t, err)
	allDue, err := s.DueTimers(bg, at(1000), 0)
	require.NoError(t, err)
	require.Len(t, allOutbox, 2*2*len(exes))

	var subsets [][]int
	used := map[int]bool{}
	for _, e := range exes {
		if p := of(e.ID); !used[p] {
			used[p] = true
			subsets = append(subsets, []int{p})
		}
	}
	require.Greater(t, len(subsets), 1, "every execution fell in one partition")
	subsets = append(subsets,
		[]int{subsets[1][0], subsets[0][0], subsets[1][0]}, // out of order, twice
		[]int{0}, []int{n - 1}, allPartitions(n))

	for _, parts := range subsets {
		in := map[int]bool{}
		for _, p := range parts {
			in[p] = true
		}
		wantOutbox := keep(allOutbox, func(e execstore.OutboxEntry) bool { return in[of(e.SourceID)] })
		wantSpawns := keep(allSpawns, func(e execstore.SpawnEntry) bool { return in[of(e.ParentID)] })
		wantDue := keep(allDue, func(d execstore.DueTimer) bool { return in[of(d.ExecutionID)] })
		for _, limit := range []int{0, 1, 3} {
			gotOutbox, err := s.PendingOutboxIn(bg, parts, limit)
			require.NoError(t, err)
			sameScan(t, limited(wantOutbox, limit), gotOutbox, "outbox of %v, limit %d", parts, limit)
			gotSpawns, err := s.PendingSpawnsIn(bg, parts, limit)
			require.NoError(t, err)
			sameScan(t, limited(wantSpawns, limit), gotSpawns, "spawns of %v, limit %d", parts, limit)
			gotDue, err := s.DueTimersIn(bg, parts, at(1000), limit)
			require.NoError(t, err)
			sameScan(t, limited(wantDue, limit), gotDue, "timers of %v, limit %d", parts, limit)
		}
	}
}

// A partition out of [0, Partitions()) is refused with ErrInvalid by every partitioned scan.
func badPartitions(t *testing.T, s execstore.Partitioned) {
	n := s.Partitions()
	for _, parts := range [][]int{{-1}, {n}, {0, n + 5}} {
		_, err := s.PendingOutboxIn(bg, parts, 0)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "outbox of %v", parts)
		_, err = s.PendingSpawnsIn(bg, parts, 0)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "spawns of %v", parts)
		_, err = s.DueTimersIn(bg, parts, at(1000), 0)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "timers of %v", parts)
	}
	_, err := s.PendingOutboxIn(bg, []int{0}, -1)
	assert.ErrorIs(t, err, execstore.ErrInvalid, "a negative limit")
}

// A scan of no partition returns nothing, even with entries and due timers in the store.
func noPartitions(t *testing.T, s execstore.Partitioned) {
	e := newExe("none")
	_, err := s.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}},
		Spawns: []execstore.Spawn{{ChildID: "none/c", RootPath: "R"}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", at(10))}})
	require.NoError(t, err)
	for _, parts := range [][]int{nil, {}} {
		o, err := s.PendingOutboxIn(bg, parts, 0)
		assert.NoError(t, err)
		assert.Empty(t, o)
		sp, err := s.PendingSpawnsIn(bg, parts, 0)
		assert.NoError(t, err)
		assert.Empty(t, sp)
		d, err := s.DueTimersIn(bg, parts, at(1000), 0)
		assert.NoError(t, err)
		assert.Empty(t, d)
	}
	all, err := s.PendingOutboxIn(bg, allPartitions(s.Partitions()), 0)
	require.NoError(t, err)
	assert.Len(t, all, 1, "the entry is in some partition")
}

// sameScan asserts that a scan returned want, in order; an empty result may be nil or not.
func sameScan[T any](t *testing.T, want, got []T, msgAndArgs ...any) {
	t.Helper()
	if len(want) == 0 {
		assert.Empty(t, got, msgAndArgs...)
		return
	}
	assert.Equal(t, want, got, msgAndArgs...)
}

func allPartitions(n int) []int {
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	return all
}

// keep returns the elements of s for which f holds, in order.
func keep[T any](s []T, f func(T) bool) []T {
	var out []T
	for _, v := range s {
		if f(v) {
			out = append(out, v)
		}
	}
	return out
}

func limited[T any](s []T, limit int) []T {
	if limit > 0 && len(s) > limit {
		return s[:limit]
	}
	return s
}
