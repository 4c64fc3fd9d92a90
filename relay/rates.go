package relay

import (
	"context"
	"sync"
	"time"

	"github.com/execstore/execstore"
)

// ratesTaken is what a runner's rate samples have recorded so far: the counters' values at
// the last record that was written. A record that fails leaves them, so the next one
// records its counts too.
type ratesTaken struct {
	mu                      sync.Mutex
	succeeded, failed, dead int64
}

// recordRatesLoop records the runner's rate sample every RatesInterval until stop, and once
// more as the session ends, within StopTimeout.
func (s *session[T, K]) recordRatesLoop(stop <-chan struct{}) {
	s.repeat(stop, s.r.opts.RatesInterval, s.r.opts.RatesInterval, func(ctx context.Context) { s.r.recordRates(ctx) })
	ctx, cancel := s.releaseCtx()
	defer cancel()
	s.r.recordRates(ctx)
}

// recordRates writes what the runner did since the last record into the current minute's
// sample: nothing when it did nothing and found nothing waiting.
func (r *runner[T, K]) recordRates(ctx context.Context) {
	r.taken.mu.Lock()
	defer r.taken.mu.Unlock()
	now := r.opts.Clock()
	succeeded, failed, dead := r.stats.succeeded.Load(), r.stats.handlerErrors.Load(), r.stats.dead.Load()
	sample := execstore.RateSample{Component: r.component, Member: r.member, Minute: now.UTC().Truncate(time.Minute),
		Delivered: succeeded - r.taken.succeeded, Failed: failed - r.taken.failed, Dead: dead - r.taken.dead}
	for _, b := range r.book.all() {
		sample.BacklogAge = max(sample.BacklogAge, b.Age(now))
	}
	if sample.Delivered == 0 && sample.Failed == 0 && sample.Dead == 0 && sample.BacklogAge == 0 {
		return
	}
	if err := r.rates.RecordRates(ctx, sample); err != nil {
		if ctx.Err() == nil {
			r.stats.rateRecordErrors.Add(1)
			r.opts.OnError(&Error{Op: OpRecordRates, Err: err})
		}
		return
	}
	r.stats.rateRecords.Add(1)
	r.taken.succeeded, r.taken.failed, r.taken.dead = succeeded, failed, dead
}
