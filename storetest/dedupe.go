package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// After a commit that processed e1: (exe, true) for e1, (exe, false) for e2, (nil, false) for
// an unknown execution; always the same answer as IsProcessed.
func loadForEvent(t *testing.T, s execstore.Store) {
	e := newExe("e")
	_, err := s.Commit(bg, e, execstore.Commit{ProcessedEventID: "e1"})
	require.NoError(t, err)
	for _, c := range []struct {
		id, event string
		exists    bool
		hit       bool
	}{{"e", "e1", true, true}, {"e", "e2", true, false}, {"unknown", "e1", false, false}} {
		exe, hit, err := s.LoadForEvent(bg, c.id, c.event)
		require.NoError(t, err)
		assert.Equal(t, c.exists, exe != nil)
		assert.Equal(t, c.hit, hit)
		if exe != nil {
			assert.EqualValues(t, 1, exe.Version)
			assert.Equal(t, e.Data, exe.Data)
		}
		p, err := s.IsProcessed(bg, c.id, c.event)
		require.NoError(t, err)
		assert.Equal(t, p, hit)
	}
}

// LoadForEvent while commits race it: "not processed" is never reported for a version that
// already holds the event.
func loadForEventUnderCommits(t *testing.T, s execstore.Store) {
	e := newExe("e")
	require.NoError(t, s.Save(bg, e))
	const events = 30
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range events {
			_, err := s.Commit(bg, e, execstore.Commit{ProcessedEventID: fmt.Sprintf("ev%d", i)})
			assert.NoError(t, err)
		}
	}()
	for {
		select {
		case <-done:
			return
		default:
		}
		exe, hit, err := s.LoadForEvent(bg, "e", "ev10")
		require.NoError(t, err)
		// ev10 is processed by the commit that creates version 12.
		if exe.Version >= 12 {
			assert.True(t, hit, "version %d holds ev10", exe.Version)
		}
	}
}

// LoadForEvent racing the creation of its execution never calls an unprocessed event
// processed.
func loadForEventRacesCreate(t *testing.T, s execstore.Store) {
	for i := range 30 {
		id := fmt.Sprintf("new%d", i)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					exe, hit, err := s.LoadForEvent(bg, id, "never")
					assert.NoError(t, err)
					assert.False(t, hit, "an event nobody processed was reported processed (exe %v)", exe != nil)
				}
			})
		}
		require.NoError(t, s.Save(bg, newExe(id)))
		close(stop)
		wg.Wait()
	}
}

// With a dedupe window of 3 the set keeps at least the last 3 commits' ids and none older
// than the last 6, and LoadForEvent agrees with IsProcessed throughout.
func dedupeWindow(t *testing.T, open func(t *testing.T, w Windows) execstore.Store) {
	const window, events = 3, 14
	s := open(t, Windows{TraceMax: 10, DedupeWindow: window})
	e := newExe("e")
	for i := range events {
		_, err := s.Commit(bg, e, execstore.Commit{ProcessedEventID: fmt.Sprintf("ev%d", i)})
		require.NoError(t, err)
		for j := 0; j <= i; j++ {
			id := fmt.Sprintf("ev%d", j)
			hit, err := s.IsProcessed(bg, "e", id)
			require.NoError(t, err)
			if i-j < window {
				assert.True(t, hit, "%s dropped after %d commits", id, i+1)
			}
			if i-j >= 2*window {
				assert.False(t, hit, "%s kept after %d commits", id, i+1)
			}
			_, lhit, err := s.LoadForEvent(bg, "e", id)
			require.NoError(t, err)
			assert.Equal(t, hit, lhit, "%s", id)
		}
	}
	assert.EqualValues(t, events, e.Version)
}

// The commit guard follows the dedupe window: with a window of 3, an event committed once and
// then followed by fewer than 3 further commits is refused when committed again, at the stored
// version; after more than 6 further commits it is accepted. At every step in between the guard
// agrees with IsProcessed: it sees the set as it stands before the commit, the commit that
// starts a generation included, and a refused re-commit changes nothing of it.
func dedupeGuardWindow(t *testing.T, open func(t *testing.T, w Windows) execstore.Store) {
	const window = 3
	s := open(t, Windows{TraceMax: 10, DedupeWindow: window})
	e := newExe("e")
	mustCommit(t, s, e, execstore.Commit{ProcessedEventID: "ev"})
	for further := 0; ; further++ {
		held, err := s.IsProcessed(bg, "e", "ev")
		require.NoError(t, err)
		if further < window {
			assert.True(t, held, "dropped after %d further commits", further)
		}
		if further > 2*window {
			assert.False(t, held, "kept after %d further commits", further)
		}
		before := *e
		_, err = s.Commit(bg, e, execstore.Commit{ProcessedEventID: "ev"})
		if !held {
			require.NoError(t, err, "an event out of the window refused after %d further commits", further)
			assert.Equal(t, before.Version+1, e.Version)
			break
		}
		requireAlreadyProcessed(t, err, "e", "ev", e.Version)
		assert.Equal(t, before, *e)
		require.LessOrEqual(t, further, 2*window, "an event refused after %d further commits", further)
		mustCommit(t, s, e, execstore.Commit{ProcessedEventID: fmt.Sprintf("other%d", further)})
	}
	hit, err := s.IsProcessed(bg, "e", "ev")
	require.NoError(t, err)
	assert.True(t, hit, "the accepted re-commit marked its event")
}
