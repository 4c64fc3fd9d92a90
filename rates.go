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

// RateTotals are a member's counts since it started.
type RateTotals struct {
	Delivered, Failed, Dead int64
}

// RateRecord is what a member records of its work: its totals when its last settled record
// was made (From) and now (To), in the minute of At, and the longest wait its scans found.
// Its minute's sample counts To minus the least From recorded in that minute.
type RateRecord struct {
	Component  string // "relay" or "sweeper"
	Member     string
	At         time.Time
	From, To   RateTotals
	BacklogAge time.Duration
}

// RateRecording is a Store that keeps what relays and sweepers did, minute by minute, for
// an operator's view of rates over time (package ui's overview). A relay or sweeper over
// such a store records every relay.Options.RatesInterval what it did since (aio is one).
type RateRecording interface {
	Store

	// RecordRates records r in its member's sample of r's minute, in one write of that
	// sample alone, so concurrent members never contend: the least From, the greatest To and
	// BacklogAge. So it is idempotent: a record whose outcome was unknown is sent again as
	// it was, and counts once. Samples older than RatesKept are dropped now and then.
	RecordRates(ctx context.Context, r RateRecord) error

	// Rates returns the samples of the minutes from since (rounded down to its minute) on,
	// each member's apart, by minute, then component and member.
	Rates(ctx context.Context, since time.Time) ([]RateSample, error)
}
