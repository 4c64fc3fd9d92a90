package opsrun

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// RecordRates records r in its member's sample of its minute: one upsert by _id
// (ops.RecordRateCommand), idempotent.
func RecordRates(ctx context.Context, env Env, r execstore.RateRecord) error {
	totals := func(t execstore.RateTotals) ops.RateTotalsDoc {
		return ops.RateTotalsDoc{Delivered: t.Delivered, Failed: t.Failed, Dead: t.Dead}
	}
	filter, update := ops.RecordRateCommand(r.At.UTC().Truncate(time.Minute), r.Component, r.Member, totals(r.From), totals(r.To),
		r.BacklogAge.Milliseconds())
	if _, err := env.Rates.UpdateOne(ctx, filter, update, options.UpdateOne().SetUpsert(true)); err != nil {
		return outcome.WriteFailureOf("rate sample", "record rates", r.Member, err)
	}
	return nil
}

// DropRates deletes the samples of the minutes before minute: one deleteMany on the _id
// index.
func DropRates(ctx context.Context, env Env, minute time.Time) error {
	if _, err := env.Rates.DeleteMany(ctx, ops.RatesBefore(minute)); err != nil {
		return outcome.WriteFailureOf("rate sample", "drop rates", "", err)
	}
	return nil
}

// Rates reads the samples from since's minute on, by minute, then component and member:
// one find on the _id index.
func Rates(ctx context.Context, env Env, since time.Time) ([]execstore.RateSample, error) {
	cur, err := env.Rates.Find(ctx, ops.RatesFrom(since.UTC().Truncate(time.Minute)))
	if err != nil {
		return nil, fmt.Errorf("reading the rate samples: %w", err)
	}
	var docs []ops.RateDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, fmt.Errorf("reading the rate samples: %w", err)
	}
	out := make([]execstore.RateSample, 0, len(docs))
	for _, d := range docs {
		out = append(out, execstore.RateSample{Component: d.Component, Member: d.Member, Minute: d.Minute.UTC(),
			Delivered: max(d.To.Delivered-d.From.Delivered, 0), Failed: max(d.To.Failed-d.From.Failed, 0), Dead: max(d.To.Dead-d.From.Dead, 0),
			BacklogAge: time.Duration(d.AgeMillis) * time.Millisecond})
	}
	slices.SortFunc(out, func(a, b execstore.RateSample) int {
		return cmp.Or(a.Minute.Compare(b.Minute), cmp.Compare(a.Component, b.Component), cmp.Compare(a.Member, b.Member))
	})
	return out, nil
}
