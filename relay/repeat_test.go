package relay_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// unanswered is a memstore whose dead counts and retention reads are never answered: each
// waits for its context to end, then returns its error.
type unanswered struct {
	*memstore.Store
	started chan string // the call's name, when it starts
	ended   chan error  // its context's error, when it returns
}

func (u *unanswered) wait(ctx context.Context, name string) error {
	u.started <- name
	<-ctx.Done()
	u.ended <- ctx.Err()
	return ctx.Err()
}

func (u *unanswered) CountDeadIn(ctx context.Context, _ []int) (map[int]int64, error) {
	return nil, u.wait(ctx, "count")
}

func (u *unanswered) ExpiredIn(ctx context.Context, _ []int, _ map[execstore.Status]time.Time, _ int) ([]execstore.FinishedExecution, error) {
	return nil, u.wait(ctx, "retention")
}

// A relay whose dead count and retention read are never answered still stops at Close: their
// context ends when it stops, and neither is reported as a failure. In virtual time.
func TestUnansweredCountAndRetentionDoNotHoldTheStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &unanswered{Store: newMemstore(t), started: make(chan string, 2), ended: make(chan error, 2)}
		retention := execstore.DefaultRetention
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil },
			relay.Options{PollInterval: 10 * time.Millisecond, Retention: &retention})
		res := make(chan error, 1)
		go func() { res <- r.Run(bg) }()
		started := map[string]bool{}
		for len(started) < 2 {
			select {
			case name := <-store.started:
				started[name] = true
			case <-time.After(waitLong):
				t.Fatalf("the calls did not start: %v", started)
			}
		}

		ctx, cancel := context.WithTimeout(bg, waitLong)
		defer cancel()
		require.NoError(t, r.Close(ctx), "Close waited for the unanswered calls")
		require.NoError(t, <-res)
		for range 2 {
			assert.ErrorIs(t, <-store.ended, context.Canceled)
		}
		assert.Zero(t, r.Stats().DeadCountErrors)
		assert.Zero(t, r.Stats().RetentionErrors)
	})
}
