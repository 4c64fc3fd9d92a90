package inspect

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
)

// Rates are what the relays and sweepers recorded of the last minutes
// (execstore.RateRecording), summed over their members, one row per minute, oldest first;
// a minute none recorded is a row of zeros.
type Rates struct {
	Minutes []RateMinute `json:"minutes"`
	// Members are the relays and sweepers that recorded any of the minutes.
	Members int `json:"members"`
	// Source is the collection the samples were read from, "database.collection".
	Source string `json:"source"`
}

// RateMinute is one minute of Rates.
type RateMinute struct {
	Minute    string `json:"minute"`    // its start, RFC 3339
	Delivered int64  `json:"delivered"` // relays' handler calls that returned nil
	Fired     int64  `json:"fired"`     // sweepers' handler calls that returned nil
	Failed    int64  `json:"failed"`    // handler calls that returned an error, of both
	Dead      int64  `json:"dead"`      // items moved to dead, by both
	// AgeSeconds is the longest oldest wait a scan found in the minute, of both.
	AgeSeconds float64 `json:"age_seconds"`
}

// ReadRates reads the samples of the n minutes up to now's from the rate samples of the
// executions collection executions in db (ops.RatesCollectionOf): one find on the _id index.
func ReadRates(ctx context.Context, db *mongo.Database, executions string, now time.Time, n int) (*Rates, error) {
	coll := db.Collection(ops.RatesCollectionOf(executions))
	last := now.UTC().Truncate(time.Minute)
	first := last.Add(-time.Duration(n-1) * time.Minute)
	samples, err := opsrun.Rates(ctx, opsrun.Env{Rates: coll}, first)
	if err != nil {
		return nil, fmt.Errorf("reading %s.%s: %w", db.Name(), coll.Name(), err)
	}
	r := &Rates{Minutes: make([]RateMinute, n), Source: db.Name() + "." + coll.Name()}
	for i := range r.Minutes {
		r.Minutes[i].Minute = FormatTime(first.Add(time.Duration(i) * time.Minute))
	}
	members := map[string]bool{}
	for _, s := range samples {
		i := int(s.Minute.Sub(first) / time.Minute)
		if i < 0 || i >= n {
			continue // a clock ahead of now's
		}
		members[s.Component+"/"+s.Member] = true
		m := &r.Minutes[i]
		if s.Component == "sweeper" {
			m.Fired += s.Delivered
		} else {
			m.Delivered += s.Delivered
		}
		m.Failed += s.Failed
		m.Dead += s.Dead
		m.AgeSeconds = max(m.AgeSeconds, seconds(s.BacklogAge))
	}
	r.Members = len(members)
	return r, nil
}
