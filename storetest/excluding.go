package storetest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// excludingBehaviours lists what Run checks of a store that implements execstore.Excluding.
var excludingBehaviours = []behaviour[execstore.Excluding]{
	{"ExcludingScansAreTheScanWithoutThem", excludingScans},
	{"BadExceptIsInvalid", badExcept},
	{"NoPartitionsExceptScanNothing", noPartitionsExcept},
}

// RunExcluding checks a store that implements execstore.Excluding: that a scan of some
// partitions' entries leaving out some executions is the partitions' scan without them, in
// the same order, with and without a limit; that an invalid id or too many of them are
// refused with execstore.ErrInvalid; and that a scan of no partition returns nothing. open
// must return a new, empty store each time it is called, and release it with t.Cleanup. Run
// runs it already for stores that are Excluding.
func RunExcluding(t *testing.T, open func(t *testing.T) execstore.Excluding) {
	t.Helper()
	runEach(t, excludingBehaviours, open)
}

// runExcluding runs RunExcluding when the stores open makes are Excluding.
func runExcluding(t *testing.T, open func(t *testing.T) execstore.Store) {
	t.Helper()
	runIf(t, open, RunExcluding)
}

// excludingScans commits entries, and timers beside them, on executions spread over the
// partitions, in interleaved rounds, with one execution's entries all acked. Then each scan of
// some partitions leaving out some executions returns exactly the partitions' scan without
// their entries, in the same order, with and without a limit: an id named twice counts once,
// an id of no execution or of another partition leaves out nothing, and leaving out none is
// the scan itself.
func excludingScans(t *testing.T, s execstore.Excluding) {
	n := s.Partitions()
	exes := commitInRounds(t, s, "except", 12)
	id := func(i int) string { return exes[i].ID }
	half := make([]int, 0, n)
	for p := 0; p < n; p += 2 {
		half = append(half, p)
	}
	for _, parts := range [][]int{half, allPartitions(n)} {
		in := map[int]bool{}
		for _, p := range parts {
			in[p] = true
		}
		wholeOutbox, err := s.PendingOutboxIn(bg, parts, 0)
		require.NoError(t, err)
		for _, except := range [][]string{
			nil, {},
			{id(0)}, {id(1)},
			{id(5), id(3), id(5)}, // out of order, twice
			{id(0), id(1), id(2), id(3), "no-such-execution"},
			{id(0), id(1), id(2), id(3), id(4), id(5), id(6), id(7), id(8), id(9), id(10), id(11)},
		} {
			out := map[string]bool{}
			for _, x := range except {
				out[x] = true
			}
			wantOutbox := keep(wholeOutbox, func(e execstore.OutboxEntry) bool { return !out[e.SourceID] })
			for _, limit := range []int{0, 1, 3} {
				got, err := s.PendingOutboxExcept(bg, parts, except, limit)
				require.NoError(t, err)
				sameScan(t, limited(wantOutbox, limit), got, "outbox of %v except %v, limit %d", parts, except, limit)
			}
		}
	}
	everything, err := s.PendingOutboxExcept(bg, allPartitions(n), nil, 0)
	require.NoError(t, err)
	require.Len(t, everything, 3*2*(len(exes)-1), "leaving out none is the whole scan")
}

// An invalid id, more than execstore.MaxTargetedIDs ids, a partition out of range or a
// negative limit are refused with ErrInvalid by a scan that leaves executions out.
func badExcept(t *testing.T, s execstore.Excluding) {
	tooMany := make([]string, execstore.MaxTargetedIDs+1)
	for i := range tooMany {
		tooMany[i] = fmt.Sprint("x", i)
	}
	all := allPartitions(s.Partitions())
	for _, ids := range [][]string{{""}, {"a", ""}, {strings.Repeat("x", execstore.MaxIDBytes+1)}, {"a\x00b"}, tooMany} {
		for _, parts := range [][]int{all, nil} {
			_, err := s.PendingOutboxExcept(bg, parts, ids, 0)
			assert.ErrorIs(t, err, execstore.ErrInvalid, "outbox except %d ids, %d partitions", len(ids), len(parts))
		}
	}
	_, err := s.PendingOutboxExcept(bg, []int{s.Partitions()}, nil, 0)
	assert.ErrorIs(t, err, execstore.ErrInvalid, "a partition out of range")
	_, err = s.PendingOutboxExcept(bg, []int{-1}, []string{"a"}, 0)
	assert.ErrorIs(t, err, execstore.ErrInvalid, "a partition out of range")
	_, err = s.PendingOutboxExcept(bg, all, []string{"a"}, -1)
	assert.ErrorIs(t, err, execstore.ErrInvalid, "a negative limit")
}

// A scan of no partition returns nothing, whatever it leaves out.
func noPartitionsExcept(t *testing.T, s execstore.Excluding) {
	e := newExe("none-except")
	_, err := s.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", at(10))}})
	require.NoError(t, err)
	for _, parts := range [][]int{nil, {}} {
		o, err := s.PendingOutboxExcept(bg, parts, []string{"other"}, 0)
		assert.NoError(t, err)
		assert.Empty(t, o)
	}
	o, err := s.PendingOutboxExcept(bg, allPartitions(s.Partitions()), []string{"other"}, 0)
	require.NoError(t, err)
	assert.Len(t, o, 1)
}
