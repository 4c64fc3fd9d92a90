package aio

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
)

var _ execstore.RateRecording = (*Store)(nil)

// ratesDropEvery is how often RecordRates drops the samples older than
// execstore.RatesKept, at most.
const ratesDropEvery = 10 * time.Minute

// RecordRates records r in its member's sample of its minute, in the collection named after
// the executions collection with "_rates" appended (see execstore.RateRecording): the
// least From, the greatest To and age, so a record sent again counts once. Cost: one upsert
// by _id; at most every 10 minutes, one deleteMany of the samples older than
// execstore.RatesKept, on the _id index. A write whose answer was lost is an
// *execstore.OutcomeUnknownError: send the same record again.
func (s *Store) RecordRates(ctx context.Context, r execstore.RateRecord) error {
	if err := checkRateRecord(r); err != nil {
		return err
	}
	_, err := submit(ctx, s, opRates, "", func(ctx context.Context) (struct{}, error) {
		if err := opsrun.RecordRates(ctx, s.env, r); err != nil {
			return struct{}{}, err
		}
		now := time.Now()
		if last := s.ratesDropped.Load(); now.UnixNano()-last >= int64(ratesDropEvery) && s.ratesDropped.CompareAndSwap(last, now.UnixNano()) {
			return struct{}{}, opsrun.DropRates(ctx, s.env, now.Add(-execstore.RatesKept))
		}
		return struct{}{}, nil
	}).Wait(ctx)
	return err
}

// Rates returns the samples of the minutes from since on (see execstore.RateRecording).
// Cost: one find on the _id index.
func (s *Store) Rates(ctx context.Context, since time.Time) ([]execstore.RateSample, error) {
	return submit(ctx, s, opRates, "", func(ctx context.Context) ([]execstore.RateSample, error) {
		return opsrun.Rates(ctx, s.env, since)
	}).Wait(ctx)
}

// checkRateRecord refuses a record without a component, member or time, with a negative
// figure, or with a From past its To.
func checkRateRecord(r execstore.RateRecord) error {
	f, t := r.From, r.To
	switch {
	case r.Component == "" || r.Member == "":
		return contract.Invalid("RateRecord", "needs a Component and a Member")
	case r.At.IsZero():
		return contract.Invalid("RateRecord.At", "must be set")
	case f.Delivered < 0 || f.Failed < 0 || f.Dead < 0 || r.BacklogAge < 0:
		return contract.Invalid("RateRecord", "has a negative figure: %+v", r)
	case f.Delivered > t.Delivered || f.Failed > t.Failed || f.Dead > t.Dead:
		return contract.Invalid("RateRecord", "has a From past its To: %+v", r)
	}
	return contract.ValidateID("RateRecord.Member", r.Member)
}
