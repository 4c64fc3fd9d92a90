package relay_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/relay"
)

// A timer's handler that re-arms its own path to the same fire time arms another timer
// (another execstore.DueTimer.Version): the sweeper's delete of the timer it fired leaves
// the re-armed one in the store (checked while the second call waits), which fires again. The second call commits on the execution too (with
// CommitRemovesTimer, through aio, that commit removes the timer in passing) and re-arms
// nothing: the timer is then gone, fired twice in all. With and without CommitRemovesTimer.
func TestTimerRearmedToItsFireTimeFiresAgain(t *testing.T) {
	for _, carried := range []bool{false, true} {
		t.Run(fmt.Sprintf("CommitRemovesTimer=%t", carried), func(t *testing.T) {
			eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
				em := newEmitter(t, store)
				fire := nowFireTime().Add(-time.Second)
				em.schedule("x", "Wait", fire)
				var mu sync.Mutex
				var fired []execstore.DueTimer
				release := make(chan struct{}) // the second call waits for it
				handler := func(ctx context.Context, tm execstore.DueTimer) error {
					mu.Lock()
					fired = append(fired, tm)
					n := len(fired)
					mu.Unlock()
					if n > 1 {
						select {
						case <-release:
						case <-ctx.Done():
							return ctx.Err()
						}
					}
					exe, err := store.Load(ctx, tm.ExecutionID)
					if err != nil {
						return err
					}
					var c execstore.Commit
					if n == 1 {
						c.Timers = []execstore.TimerOp{execstore.ScheduleTimer(tm.Path, tm.FireAt)} // the same fire time
					}
					_, err = store.Commit(ctx, exe, c)
					return err
				}
				count := func() int {
					mu.Lock()
					defer mu.Unlock()
					return len(fired)
				}
				sw := relay.NewSweeper(store, handler, relay.Options{CommitRemovesTimer: carried})
				stop := run(t, sw)
				settleUntil(t, func() bool { return sw.Stats().Acked == 1 }, "the first firing deleted")
				// The second call, if it came, waits: nothing but the first firing's delete
				// can have removed the re-armed timer.
				left := timers(t, store)
				require.Len(t, left, 1, "the re-armed timer survives the first firing's delete")
				assert.True(t, left[0].FireAt.Equal(fire))
				close(release)
				settleUntil(t, func() bool { return count() == 2 && sw.Stats().Acked == 2 }, "the re-armed timer fired and settled")
				require.NoError(t, stop())
				mu.Lock()
				defer mu.Unlock()
				require.Len(t, fired, 2)
				for _, tm := range fired {
					assert.Equal(t, "Wait", tm.Path)
					assert.True(t, tm.FireAt.Equal(fire), "fires at %s", tm.FireAt)
				}
				assert.Less(t, fired[0].Version, fired[1].Version, "the second is the re-arm, another arming")
				if _, ok := store.(*aio.Store); ok && carried {
					assert.EqualValues(t, 1, sw.Stats().Carried, "the second call's commit removed the timer")
				}
				assert.Empty(t, timers(t, store))
			})
		})
	}
}
