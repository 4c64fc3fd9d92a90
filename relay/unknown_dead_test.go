package relay_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// deadAnswerLost is a store whose moves to dead are applied, and whose answer is lost: the
// relay hears an unknown outcome.
type deadAnswerLost struct {
	*memstore.Store
}

func (s deadAnswerLost) Fail(ctx context.Context, ref execstore.ItemRef, f execstore.Failure) (execstore.Attempts, bool, error) {
	a, ok, err := s.Store.Fail(ctx, ref, f)
	if err == nil && f.Dead {
		return execstore.Attempts{}, false, &execstore.OutcomeUnknownError{Op: "fail", ExecutionID: ref.ExecutionID,
			Err: context.DeadlineExceeded}
	}
	return a, ok, err
}

// A move to dead whose answer is lost is read back: the item is dead in the store, so the
// relay counts it, calls OnDead with its attempts, and delivers it no more.
func TestUnknownMoveToDeadIsReadBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := memstore.New(memstore.Options{})
		defer func() { _ = inner.Close(bg) }()
		var dead deadLog
		calls := 0
		r := relay.New(deadAnswerLost{inner}, func(context.Context, execstore.OutboxEntry) error {
			calls++
			return fmt.Errorf("poison: %w", relay.ErrPermanent)
		}, relay.Options{OnDead: dead.add, RetryMin: time.Millisecond, RetryMax: time.Millisecond})
		ctx, cancel := context.WithCancel(bg)
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		newEmitter(t, inner).emit("s", "t", "e1")
		time.Sleep(5 * time.Second) // five polls
		synctest.Wait()

		assert.Equal(t, 1, calls, "delivered once: dead after")
		assert.EqualValues(t, 1, r.Stats().Dead, "counted as dead")
		events := dead.all()
		require.Len(t, events, 1, "OnDead told")
		assert.Equal(t, 1, events[0].Attempts.Count)
		assert.Zero(t, r.Stats().FailureErrors, "settled by the read, not an error")
		page, err := inner.ListDead(bg, execstore.DeadQuery{})
		require.NoError(t, err)
		assert.Len(t, page.Items, 1)
		cancel()
		require.NoError(t, <-done)
	})
}
