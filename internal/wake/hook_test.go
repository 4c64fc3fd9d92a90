package wake_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/memstore"
)

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// memstore registers a signal of its own from New to Close, and its commits notify it: an
// emit or a spawn wakes EmittedC, an armed timer wakes ScheduledBeforeC by its earliest fire
// time, and a commit with neither (or a failed one) wakes nothing.
func TestMemstoreHook(t *testing.T) {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	other := memstore.New(memstore.Options{})
	sig := wake.Of(store)
	require.NotNil(t, sig)
	assert.NotSame(t, sig, wake.Of(other), "each store has its own signal")

	exe := &execstore.Execution{ID: "x", DefinitionID: "d", Status: execstore.Running}
	commit := func(c execstore.Commit) {
		t.Helper()
		_, err := store.Commit(ctx, exe, c)
		require.NoError(t, err)
	}
	for _, c := range []struct {
		name                 string
		commit               execstore.Commit
		emitted, soon, later bool // EmittedC, ScheduledBeforeC(100), ScheduledBeforeC(1e12)
	}{
		{"snapshot alone", execstore.Commit{}, false, false, false},
		{"emit", execstore.Commit{Emits: []execstore.Emit{{TargetID: "y", Event: []byte("e")}}}, true, false, false},
		{"spawn", execstore.Commit{Spawns: []execstore.Spawn{{ChildID: "c", RootPath: "F.A"}}}, true, false, false},
		{"timer due late", execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(5000))}}, false, false, true},
		{"earliest of two timers", execstore.Commit{Timers: []execstore.TimerOp{
			execstore.ScheduleTimer("T", unixAt(5000)), execstore.ScheduleTimer("U", unixAt(50))}}, false, true, true},
		{"cancel alone", execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer("T")}}, false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sig.Emitted() // end the rounds left by the cases before: start afresh
			sig.Scheduled(math.Inf(-1))
			emitted, soon := sig.EmittedC(), sig.ScheduledBeforeC(100)
			commit(c.commit)
			assert.Equal(t, c.emitted, isClosed(emitted), "emitted")
			assert.Equal(t, c.soon, isClosed(soon), "scheduled before 100")
			later := sig.ScheduledBeforeC(1e12)
			commit(c.commit)
			assert.Equal(t, c.later, isClosed(later), "scheduled before 1e12")
		})
	}

	emitted := sig.EmittedC()
	stale := *exe
	stale.Version--
	_, err := store.Commit(ctx, &stale, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("lost")}}})
	require.ErrorIs(t, err, execstore.ErrConflict)
	assert.False(t, isClosed(emitted), "a commit that failed notifies no one")

	require.NoError(t, store.Close(ctx))
	assert.Nil(t, wake.Of(store), "Close unregisters")
	require.NoError(t, other.Close(ctx))
}

// unixAt is a fire time given in seconds since the Unix epoch.
func unixAt(seconds float64) time.Time { return time.Unix(0, int64(seconds*1e9)).UTC() }
