package execstore

import (
	"context"
	"time"
)

// RatesKept is how long a RateRecording store keeps its samples: a write drops those older.
const RatesKept = 24 * time.Hour

// RateSample is what one relay or sweeper (a member of its lease key: relay.Options.Name
// and a random part) did within one minute, as it recorded it: its handler calls that
// returned nil (Delivered) or an error (Failed), the items it moved to dead, and the
// longest wait its scans found in the partitions it held (BacklogAge).
type RateSample struct {
	Component string    // "relay" or "sweeper"
	Member    string    // the relay's member name
	Minute    time.Time // the minute's start, UTC
	Delivered int64
	Failed    int64
	Dead      int64
	// BacklogAge is the longest of the oldest waits its scans found in the minute: an
	// entry's since its commit, a timer's since its fire time.
	BacklogAge time.Duration
}

// RateRecording is a Store that keeps what relays and sweepers did, minute by minute, for
// an operator's view of rates over time (package ui's overview). A relay or sweeper over
// such a store records every relay.Options.RatesInterval what it did since (aio is one).
type RateRecording interface {
	Store

	// RecordRates adds s to what its member recorded in its minute: the counts summed, the
	// age the largest. One write, of the member's own sample of that minute, so concurrent
	// members never contend; samples older than RatesKept are dropped now and then.
	RecordRates(ctx context.Context, s RateSample) error

	// Rates returns the samples of the minutes from since (rounded down to its minute) on,
	// each member's apart, by minute, then component and member.
	Rates(ctx context.Context, since time.Time) ([]RateSample, error)
}
