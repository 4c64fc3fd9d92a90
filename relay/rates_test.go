package relay_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/aiotest"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/relay"
)

// A relay over a store that records rates records what it did: its deliveries, its failed
// ones and the items it moved to dead, in the minute's sample of its own member; the
// counts sum to the relay's Stats, whatever the number of records.
func TestRatesRecorded(t *testing.T) {
	var opts aio.Options
	opts.Database = testserver.Database(t, "relay")
	store, _ := aiotest.Open(t, srv.URI, opts)
	e := newEmitter(t, store)
	for i := range 6 {
		e.emit("src", "tgt", string(rune('a'+i)))
	}
	e.emit("poison", "tgt", "x")
	var calls atomic.Int64
	r := relay.New(store, func(_ context.Context, en execstore.OutboxEntry) error {
		calls.Add(1)
		if en.SourceID == "poison" {
			return relay.ErrPermanent
		}
		if calls.Load()%3 == 0 {
			return errors.New("flaky")
		}
		return nil
	}, relay.Options{Name: "rates", RatesInterval: 20 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 5 * time.Millisecond,
		PollInterval: 20 * time.Millisecond})
	stop := run(t, r)
	eventually(t, func() bool { return pending(t, store) == 0 }, "every entry delivered or dead")
	require.NoError(t, stop())
	st := r.Stats()
	require.Positive(t, st.RateRecords)
	require.Zero(t, st.RateRecordErrors)

	samples, err := store.Rates(bg, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	var sum execstore.RateSample
	for _, s := range samples {
		assert.Equal(t, "relay", s.Component)
		assert.Equal(t, r.Member(), s.Member)
		assert.Equal(t, s.Minute, s.Minute.Truncate(time.Minute))
		sum.Delivered += s.Delivered
		sum.Failed += s.Failed
		sum.Dead += s.Dead
	}
	assert.Equal(t, int64(6), sum.Delivered, "the six entries of src")
	assert.Equal(t, st.Succeeded, sum.Delivered)
	assert.Equal(t, st.HandlerErrors, sum.Failed)
	assert.Positive(t, sum.Failed, "the poison and the flaky calls")
	assert.Equal(t, int64(1), sum.Dead)

	// A relay with RatesInterval negative records nothing.
	e.emit("src", "tgt", "z")
	quiet := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil },
		relay.Options{Name: "quiet", RatesInterval: -1, PollInterval: 20 * time.Millisecond})
	stop = run(t, quiet)
	eventually(t, func() bool { return pending(t, store) == 0 }, "delivered")
	require.NoError(t, stop())
	assert.Zero(t, quiet.Stats().RateRecords)
	after, err := store.Rates(bg, time.Now().Add(-time.Hour))
	require.NoError(t, err)
	for _, s := range after {
		assert.NotEqual(t, quiet.Member(), s.Member)
	}
}
