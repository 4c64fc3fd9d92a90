package memstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
)

// Without a window every processed id is kept; commits without one add nothing.
func TestDedupeKeepsEverything(t *testing.T) {
	s := memstore.New(memstore.Options{})
	e := newExe("e")
	for i := range 50 {
		c := execstore.Commit{}
		if i%2 == 0 {
			c.ProcessedEventID = fmt.Sprintf("ev%d", i)
		}
		mustCommit(t, s, e, c)
	}
	for i := range 50 {
		hit, err := s.IsProcessed(bg, "e", fmt.Sprintf("ev%d", i))
		require.NoError(t, err)
		assert.Equal(t, i%2 == 0, hit, "ev%d", i)
	}
}

// With a window W the set holds exactly the ids the MongoDB store's two generation arrays
// hold: after the commit that created version v, the id processed by the commit that created
// version u is kept if and only if u/W >= v/W - 1 (its generation or the one before). So at
// least the last W commits' ids are kept, and at most the last 2W. LoadForEvent agrees with
// IsProcessed throughout.
func TestDedupeWindow(t *testing.T) {
	for _, window := range []int64{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("W=%d", window), func(t *testing.T) {
			s := memstore.New(memstore.Options{DedupeWindow: int(window)})
			e := newExe("e")
			const commits = 23
			for v := int64(1); v <= commits; v++ {
				c := execstore.Commit{ProcessedEventID: fmt.Sprintf("v%d", v)}
				if v%7 == 0 {
					c.ProcessedEventID = "" // a commit that processed nothing still takes its turn
				}
				mustCommit(t, s, e, c)
				require.Equal(t, v, e.Version)
				kept := 0
				for u := int64(1); u <= v; u++ {
					id := fmt.Sprintf("v%d", u)
					hit, err := s.IsProcessed(bg, "e", id)
					require.NoError(t, err)
					want := u%7 != 0 && u/window >= v/window-1
					assert.Equal(t, want, hit, "%s after version %d", id, v)
					if v-u < window && u%7 != 0 {
						assert.True(t, hit, "%s dropped within the window", id)
					}
					if v-u >= 2*window {
						assert.False(t, hit, "%s kept past twice the window", id)
					}
					if hit {
						kept++
					}
					_, lhit, err := s.LoadForEvent(bg, "e", id)
					require.NoError(t, err)
					assert.Equal(t, hit, lhit, id)
				}
				assert.LessOrEqual(t, int64(kept), 2*window)
			}
		})
	}
}

// An id processed again once it has left the window is accepted, and its new commit keeps it
// for a window of its own: it is recognised by the version that processed it last.
func TestDedupeSameIDTwice(t *testing.T) {
	s := memstore.New(memstore.Options{DedupeWindow: 2})
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "x"}) // v1, generation 0
	for range 3 {                                                // v2, v3 (gen 1), v4 resets gen 0
		mustCommit(t, s, e, execstore.Commit{})
	}
	hit, err := s.IsProcessed(bg, "e", "x")
	require.NoError(t, err)
	assert.False(t, hit)
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "x"}) // v5, generation 0 again
	_, err = s.Commit(bg, e, execstore.Commit{ProcessedEventID: "x"})
	var ae *execstore.AlreadyProcessedError
	require.ErrorAs(t, err, &ae)
	assert.EqualValues(t, 5, ae.Version)
	mustCommit(t, s, e, execstore.Commit{}) // v6 resets gen 1
	mustCommit(t, s, e, execstore.Commit{}) // v7
	hit, err = s.IsProcessed(bg, "e", "x")
	require.NoError(t, err)
	assert.True(t, hit, "kept by version 5's generation")
	mustCommit(t, s, e, execstore.Commit{}) // v8 resets gen 0
	hit, err = s.IsProcessed(bg, "e", "x")
	require.NoError(t, err)
	assert.False(t, hit)
}

// The commit guard refuses exactly the ids the set holds before the commit: with a window W,
// after the commit that created version v, a commit of the id processed at version u is refused
// if and only if u/W >= v/W - 1, even when that commit is the first of a generation and would
// have emptied the id's set itself. An id out of the window is accepted again.
func TestDedupeGuardFollowsWindow(t *testing.T) {
	for _, window := range []int64{1, 2, 3, 5} {
		t.Run(fmt.Sprintf("W=%d", window), func(t *testing.T) {
			const commits = 13
			for v := int64(1); v <= commits; v++ {
				for u := int64(1); u <= v; u++ {
					s := memstore.New(memstore.Options{DedupeWindow: int(window)})
					e := newExe("e")
					for i := int64(1); i <= v; i++ {
						mustCommit(t, s, e, execstore.Commit{ProcessedEventID: fmt.Sprintf("v%d", i)})
					}
					id := fmt.Sprintf("v%d", u)
					_, err := s.Commit(bg, e, execstore.Commit{ProcessedEventID: id})
					if u/window >= v/window-1 {
						var ae *execstore.AlreadyProcessedError
						require.ErrorAs(t, err, &ae, "%s after version %d", id, v)
						assert.Equal(t, execstore.AlreadyProcessedError{ExecutionID: "e", EventID: id, Version: v}, *ae)
						assert.Equal(t, v, e.Version)
					} else {
						require.NoError(t, err, "%s after version %d", id, v)
						assert.Equal(t, v+1, e.Version)
					}
				}
			}
		})
	}
}
