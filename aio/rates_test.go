package aio_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
)

// RecordRates keeps, in a member's sample of a minute, the least From and the greatest To
// of its records there (the age the largest), so a record sent twice counts once; each
// member's samples stay apart; samples older than execstore.RatesKept are dropped; a bad
// record is refused before any I/O.
func TestRatesRecordsAreIdempotent(t *testing.T) {
	h := newHarness(t, aio.Options{})
	s := h.store
	now := time.Now().UTC()
	minute := now.Truncate(time.Minute)
	total := func(d, f, x int64) execstore.RateTotals {
		return execstore.RateTotals{Delivered: d, Failed: f, Dead: x}
	}
	old := execstore.RateRecord{Component: "relay", Member: "m1", At: now.Add(-25 * time.Hour), To: total(9, 0, 0)}
	require.NoError(t, s.RecordRates(bg, old), "recorded, then dropped with the samples older than a day")
	first := execstore.RateRecord{Component: "relay", Member: "m1", At: minute, From: total(10, 0, 0), To: total(13, 1, 0), BacklogAge: 2 * time.Second}
	for _, r := range []execstore.RateRecord{
		first,
		first, // sent again: its outcome was not known
		{Component: "relay", Member: "m1", At: minute.Add(59 * time.Second), From: total(13, 1, 0), To: total(17, 1, 1), BacklogAge: time.Second},
		{Component: "relay", Member: "m2", At: now, To: total(5, 0, 0)},
		{Component: "sweeper", Member: "m1", At: minute.Add(-time.Minute), To: total(2, 0, 0), BacklogAge: 1500 * time.Millisecond},
	} {
		require.NoError(t, s.RecordRates(bg, r))
	}
	got, err := s.Rates(bg, now.Add(-48*time.Hour))
	require.NoError(t, err)
	assert.Equal(t, []execstore.RateSample{
		{Component: "sweeper", Member: "m1", Minute: minute.Add(-time.Minute), Delivered: 2, BacklogAge: 1500 * time.Millisecond},
		{Component: "relay", Member: "m1", Minute: minute, Delivered: 7, Failed: 1, Dead: 1, BacklogAge: 2 * time.Second},
		{Component: "relay", Member: "m2", Minute: minute, Delivered: 5},
	}, got)
	got, err = s.Rates(bg, minute.Add(30*time.Second))
	require.NoError(t, err)
	assert.Len(t, got, 2, "from since's minute on")

	for _, bad := range []execstore.RateRecord{
		{Member: "m", At: now},
		{Component: "relay", At: now},
		{Component: "relay", Member: "m"},
		{Component: "relay", Member: "m", At: now, From: total(-1, 0, 0)},
		{Component: "relay", Member: "m", At: now, From: total(2, 0, 0), To: total(1, 0, 0)},
	} {
		assert.ErrorIs(t, s.RecordRates(bg, bad), execstore.ErrInvalid, "%+v", bad)
	}
}
