package wake

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

func restoreNamed(name string, log *[]string) Restore {
	return func(context.Context) (bool, error) { *log = append(*log, name); return name == "applied", nil }
}

// Only a commit of the timer's execution gets it, one commit at a time; one that won is the
// last; none after Finish.
func TestFiredTimerTakes(t *testing.T) {
	sig, other := &Signal{}, &Signal{}
	f := NewFiredTimer(execstore.DueTimer{ExecutionID: "x", Path: "p"}, sig)
	ctx := WithFiredTimer(context.Background(), f)
	assert.Nil(t, FiredTimerOf(ctx, "y", sig))
	assert.Nil(t, FiredTimerOf(ctx, "x", other), "another store's commit")
	assert.Nil(t, FiredTimerOf(context.Background(), "x", sig))
	require.Same(t, f, FiredTimerOf(ctx, "x", sig))

	var log []string
	first, ok := f.Take(restoreNamed("lost", &log))
	require.True(t, ok)
	_, ok = f.Take(restoreNamed("second", &log))
	assert.False(t, ok, "one commit in flight at a time")
	f.Released(first)
	second, ok := f.Take(restoreNamed("applied", &log))
	require.True(t, ok)
	f.Released(first) // a late settle of the first take changes nothing
	f.Removed(second)
	_, ok = f.Take(restoreNamed("third", &log))
	assert.False(t, ok, "removed already")

	removed, restore := f.Finish(context.Background())
	assert.True(t, removed)
	ok, err := restore(context.Background())
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, []string{"applied"}, log, "only the applied commit's restore, not the lost one's")
}

// Finish waits for a commit in flight; an unknown outcome is a restore to try, not a removal.
// In virtual time.
func TestFiredTimerFinishWaitsForTheCommitInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewFiredTimer(execstore.DueTimer{ExecutionID: "x", Path: "p"}, &Signal{})
		var log []string
		take, ok := f.Take(restoreNamed("applied", &log))
		require.True(t, ok)
		done := make(chan bool)
		go func() {
			removed, restore := f.Finish(context.Background())
			done <- removed || restore == nil
		}()
		synctest.Wait() // Finish runs until it blocks
		select {
		case <-done:
			t.Fatal("Finish returned while the commit was in flight")
		default:
		}
		f.MaybeRemoved(take)
		assert.False(t, <-done, "not removed, and a restore to try")
		_, ok = f.Take(restoreNamed("late", &log))
		assert.False(t, ok, "no commit takes it after Finish")
	})
}
