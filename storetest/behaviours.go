package storetest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// behaviour is one behaviour a suite checks of a store of kind S.
type behaviour[S any] struct {
	name  string
	check func(t *testing.T, s S)
}

// runEach runs each of behaviours as a subtest, on a store of its own that open makes.
func runEach[S any](t *testing.T, behaviours []behaviour[S], open func(t *testing.T) S) {
	t.Helper()
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) { b.check(t, open(t)) })
	}
}

// runIf runs suite when the stores open makes are of kind S, each seen as an S.
func runIf[S any](t *testing.T, open func(t *testing.T) execstore.Store, suite func(t *testing.T, open func(t *testing.T) S)) {
	t.Helper()
	if _, ok := open(t).(S); !ok {
		return
	}
	suite(t, func(t *testing.T) S { return open(t).(S) })
}

// commitInRounds creates n executions named prefix-00… and commits to each in three
// interleaved rounds: two entries (one with no target, one to "elsewhere") and a timer a
// round, at fire times 100–149. Then it acks every entry of the second. It returns the
// executions.
func commitInRounds(t *testing.T, s execstore.Store, prefix string, n int) []*execstore.Execution {
	t.Helper()
	exes := make([]*execstore.Execution, n)
	for i := range exes {
		exes[i] = newExe(fmt.Sprintf("%s-%02d", prefix, i))
	}
	for round := range 3 {
		for i, e := range exes {
			_, err := s.Commit(bg, e, execstore.Commit{
				Emits:  []execstore.Emit{{Event: []byte(fmt.Sprint(round, "a"))}, {TargetID: "elsewhere", Event: []byte(fmt.Sprint(round, "b"))}},
				Timers: []execstore.TimerOp{execstore.ScheduleTimer(fmt.Sprint("T", round), at(float64(100+(i*7+round*13)%50)))},
			})
			require.NoError(t, err)
		}
	}
	all, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	for _, e := range all {
		if e.SourceID == exes[1].ID {
			require.NoError(t, s.AckOutbox(bg, e.SourceID, e.Seq))
		}
	}
	return exes
}
