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

// RecordRates adds s to its member's sample of its minute, in the collection named after the
// executions collection with "_rates" appended (see execstore.RateRecording). Cost: one
// upsert by _id; at most every 10 minutes, one deleteMany of the samples older than
// execstore.RatesKept, on the _id index.
func (s *Store) RecordRates(ctx context.Context, r execstore.RateSample) error {
	if err := checkRateSample(r); err != nil {
		return err
	}
	r.Minute = r.Minute.UTC().Truncate(time.Minute)
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

// checkRateSample refuses a sample without a component, member or minute, or with a
// negative figure.
func checkRateSample(r execstore.RateSample) error {
	switch {
	case r.Component == "" || r.Member == "":
		return contract.Invalid("RateSample", "needs a Component and a Member")
	case r.Minute.IsZero():
		return contract.Invalid("RateSample.Minute", "must be set")
	case r.Delivered < 0 || r.Failed < 0 || r.Dead < 0 || r.BacklogAge < 0:
		return contract.Invalid("RateSample", "has a negative figure: %+v", r)
	}
	return contract.ValidateID("RateSample.Member", r.Member)
}
