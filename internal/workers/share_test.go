package workers_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	pool "github.com/execstore/execstore/internal/workers"
)

// Two shares of one pool: closing one waits for its own tasks, refuses its later submits and
// leaves the pool serving the other; withdrawn tasks are not waited for. In virtual time.
func TestShare(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := pool.New(pool.Config{Workers: 1, QueueDepth: 4})
		defer p.Close(context.Background())
		a, b := p.Share(), p.Share()

		release := make(chan struct{})
		slow := newProbe(func(context.Context) { <-release })
		require.NoError(t, a.Submit(context.Background(), &slow.env, slow))
		queued := newProbe(nil)
		require.NoError(t, a.Submit(context.Background(), &queued.env, queued))
		withdrawn := newProbe(nil)
		require.NoError(t, a.Submit(context.Background(), &withdrawn.env, withdrawn))
		require.True(t, withdrawn.env.Withdraw())

		closed := make(chan error, 1)
		go func() { closed <- a.Close(context.Background()) }()
		synctest.Wait() // Close runs until it blocks
		select {
		case <-closed:
			t.Fatal("the share closed while its tasks had not run")
		default:
		}
		late := newProbe(nil)
		assert.ErrorIs(t, a.Submit(context.Background(), &late.env, late), execstore.ErrClosed)
		assert.ErrorIs(t, a.TrySubmit(context.Background(), &late.env, late), execstore.ErrClosed)
		close(release)
		require.NoError(t, <-closed)
		requireRanOnce(t, slow)
		requireRanOnce(t, queued)
		requireUntouched(t, withdrawn)
		requireUntouched(t, late)

		other := newProbe(nil)
		require.NoError(t, b.Submit(context.Background(), &other.env, other))
		requireRanOnce(t, other)
		require.NoError(t, b.Close(context.Background()))
	})
}

// A share's Close gives up when its context ends, and the pool still runs what was accepted.
// In virtual time.
func TestShareCloseGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := pool.New(pool.Config{Workers: 1, QueueDepth: 4})
		s := p.Share()
		release := make(chan struct{})
		slow := newProbe(func(context.Context) { <-release })
		require.NoError(t, s.Submit(context.Background(), &slow.env, slow))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		assert.ErrorIs(t, s.Close(ctx), context.DeadlineExceeded)
		close(release)
		requireRanOnce(t, slow)
		require.NoError(t, p.Close(context.Background()))
	})
}
