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
	"github.com/execstore/execstore/relay"
)

// heldAcks is a store whose acks wait until release is closed, as a store that carries acks
// in later commits holds them.
type heldAcks struct {
	execstore.Store
	release chan struct{}
}

func (s *heldAcks) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	select {
	case <-s.release:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.AckOutbox(ctx, sourceID, seq)
}

// Items whose acks the store holds pace the scans only beyond 2×Batch of them: delivery goes
// on while acks wait, up to 4×Batch items in flight, and no further until acks complete.
// In virtual time.
func TestHeldAcksPaceOnlyBeyondTwiceTheBatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const batch, entries = 4, 40
		store := newMemstore(t)
		em := newEmitter(t, store)
		for i := range entries {
			em.emit(fmt.Sprintf("s%02d", i), fmt.Sprintf("t%02d", i), "e")
		}
		held := &heldAcks{Store: store, release: make(chan struct{})}
		d := newDeliveries(t)
		r := relay.New(held, d.handle, relay.Options{Lanes: 4, Batch: batch, PollInterval: 10 * time.Millisecond})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Delivered == 4*batch }, "4×Batch delivered while no ack completed")
		time.Sleep(200 * time.Millisecond) // twenty polls
		st := r.Stats()
		assert.EqualValues(t, 4*batch, st.Delivered, "no more than 4×Batch in flight")
		assert.EqualValues(t, 4*batch, st.InFlight)
		assert.Zero(t, st.Acked)
		close(held.release)
		settleUntil(t, func() bool { return r.Stats().Acked == entries }, "every entry acked once the acks are released")
		require.NoError(t, stop())
		d.check()
		assert.Zero(t, pending(t, store))
	})
}
