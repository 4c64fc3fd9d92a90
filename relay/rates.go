package relay

import (
	"context"
	"sync"

	"github.com/execstore/execstore"
)

// rateRecorder is what a runner's rate records have settled: its totals at the last record
// known written, and the record whose outcome is not known yet, sent again as it was
// before any other (a record is idempotent: see execstore.RateRecording), so that a
// record that landed without an answer counts once.
type rateRecorder struct {
	mu        sync.Mutex
	settled   execstore.RateTotals
	unsettled *execstore.RateRecord
}

// recordRatesLoop records the runner's rates every RatesInterval until stop, and once more
// as the session ends, within StopTimeout.
func (s *session[T, K]) recordRatesLoop(stop <-chan struct{}) {
	s.repeat(stop, s.r.opts.RatesInterval, s.r.opts.RatesInterval, func(ctx context.Context) { s.r.recordRates(ctx) })
	ctx, cancel := s.releaseCtx()
	defer cancel()
	s.r.recordRates(ctx)
}

// recordRates sends the unsettled record again, if any, then records what the runner did
// since the last settled one: nothing when it did nothing and found nothing waiting.
func (r *runner[T, K]) recordRates(ctx context.Context) {
	rr := &r.rateRec
	rr.mu.Lock()
	defer rr.mu.Unlock()
	if u := rr.unsettled; u != nil {
		if !r.sendRates(ctx, *u) {
			return
		}
		rr.settled, rr.unsettled = u.To, nil
	}
	now := r.opts.Clock()
	rec := execstore.RateRecord{Component: r.component, Member: r.member, At: now, From: rr.settled,
		To: execstore.RateTotals{Delivered: r.stats.succeeded.Load(), Failed: r.stats.handlerErrors.Load(), Dead: r.stats.dead.Load()}}
	for _, b := range r.book.all() {
		rec.BacklogAge = max(rec.BacklogAge, b.Age(now))
	}
	if rec.To == rec.From && rec.BacklogAge == 0 {
		return
	}
	rr.unsettled = &rec
	if r.sendRates(ctx, rec) {
		rr.settled, rr.unsettled = rec.To, nil
	}
}

// sendRates writes rec, and reports whether it is known written.
func (r *runner[T, K]) sendRates(ctx context.Context, rec execstore.RateRecord) bool {
	if err := r.rates.RecordRates(ctx, rec); err != nil {
		if ctx.Err() == nil {
			r.stats.rateRecordErrors.Add(1)
			r.opts.OnError(&Error{Op: OpRecordRates, Err: err})
		}
		return false
	}
	r.stats.rateRecords.Add(1)
	return true
}
