package relay_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// lossyRates is a memstore that records rates as aio does (the least From, the greatest To
// per member and minute), and loses the answer of every other record it applies: an
// outcome unknown to the relay.
type lossyRates struct {
	*memstore.Store
	mu      sync.Mutex
	calls   int
	samples map[time.Time][2]execstore.RateTotals
}

func (s *lossyRates) RecordRates(_ context.Context, r execstore.RateRecord) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := r.At.Truncate(time.Minute)
	cur, ok := s.samples[m]
	if !ok {
		cur = [2]execstore.RateTotals{r.From, r.To}
	}
	cur[0] = execstore.RateTotals{Delivered: min(cur[0].Delivered, r.From.Delivered), Failed: min(cur[0].Failed, r.From.Failed), Dead: min(cur[0].Dead, r.From.Dead)}
	cur[1] = execstore.RateTotals{Delivered: max(cur[1].Delivered, r.To.Delivered), Failed: max(cur[1].Failed, r.To.Failed), Dead: max(cur[1].Dead, r.To.Dead)}
	s.samples[m] = cur
	s.calls++
	if s.calls%2 == 1 {
		return &execstore.OutcomeUnknownError{Op: "record rates", ExecutionID: r.Member, Err: errors.New("the answer was lost")}
	}
	return nil
}

func (s *lossyRates) Rates(context.Context, time.Time) ([]execstore.RateSample, error) {
	return nil, nil
}

// A relay whose rate records land without an answer sends each again as it was before the
// next, so every delivery counts once, in the minute it was recorded in. In virtual time.
func TestRatesCountOnceWhenAnswersAreLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := &lossyRates{Store: memstore.New(memstore.Options{}), samples: map[time.Time][2]execstore.RateTotals{}}
		defer store.Close(context.Background())
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil },
			relay.Options{RatesInterval: 10 * time.Second, PollInterval: time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		exe := &execstore.Execution{ID: "src", DefinitionID: "d", Status: execstore.Running}
		for range 12 { // an event every 15s over three minutes: records in several minutes
			_, err := store.Commit(context.Background(), exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("e")}}})
			require.NoError(t, err)
			time.Sleep(15 * time.Second)
		}
		cancel()
		require.NoError(t, <-done)
		var sum int64
		store.mu.Lock()
		for _, s := range store.samples {
			sum += s[1].Delivered - s[0].Delivered
		}
		calls := store.calls
		store.mu.Unlock()
		assert.Equal(t, int64(12), sum, "each delivery counted once")
		assert.Equal(t, int64(12), r.Stats().Succeeded)
		assert.Greater(t, calls, 4)
		assert.Positive(t, r.Stats().RateRecordErrors, "the lost answers were reported")
	})
}
