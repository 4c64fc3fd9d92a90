package aio_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
)

// RecordRates sums a member's samples of one minute (the age the largest), keeps each
// member's apart, drops the samples older than execstore.RatesKept, and refuses a bad
// sample before any I/O.
func TestRatesSumPerMemberAndMinute(t *testing.T) {
	h := newHarness(t, aio.Options{})
	s := h.store
	now := time.Now().UTC()
	minute := now.Truncate(time.Minute)
	old := execstore.RateSample{Component: "relay", Member: "m1", Minute: now.Add(-25 * time.Hour), Delivered: 9}
	require.NoError(t, s.RecordRates(bg, old), "recorded, then dropped with the samples older than a day")
	for _, r := range []execstore.RateSample{
		{Component: "relay", Member: "m1", Minute: now, Delivered: 3, Failed: 1, BacklogAge: 2 * time.Second},
		{Component: "relay", Member: "m1", Minute: minute.Add(59 * time.Second), Delivered: 4, Dead: 1, BacklogAge: time.Second},
		{Component: "relay", Member: "m2", Minute: now, Delivered: 5},
		{Component: "sweeper", Member: "m1", Minute: minute.Add(-time.Minute), Delivered: 2, BacklogAge: 1500 * time.Millisecond},
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

	for _, bad := range []execstore.RateSample{
		{Member: "m", Minute: now},
		{Component: "relay", Minute: now},
		{Component: "relay", Member: "m"},
		{Component: "relay", Member: "m", Minute: now, Delivered: -1},
	} {
		assert.ErrorIs(t, s.RecordRates(bg, bad), execstore.ErrInvalid, "%+v", bad)
	}
}
