package inspect

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/opsrun"
)

// Backlog is the work waiting in each partition (execstore.PartitionBacklog), its totals,
// and what retention has deleted.
type Backlog struct {
	Now string `json:"now"` // what ages and lags are measured to
	// Partitions are those with work waiting, in partition order; the others are left out.
	Partitions []PartitionBacklog `json:"partitions"`
	Total      BacklogFigures     `json:"total"` // sums, and the oldest and most overdue of all
	Retention  RetentionTotals    `json:"retention"`
}

// PartitionBacklog is one partition's backlog.
type PartitionBacklog struct {
	Partition int `json:"partition"`
	BacklogFigures
}

// BacklogFigures are the work waiting in a partition, or in all of them.
type BacklogFigures struct {
	PendingOutbox int64 `json:"pending_outbox"` // entries not yet acknowledged, dead ones excluded
	PendingSpawns int64 `json:"pending_spawns"` // spawn intents not yet acknowledged, dead ones excluded
	// OldestPendingAt is the commit time of the oldest pending entry or intent, by its
	// committer's clock; absent when none records one.
	OldestPendingAt   string  `json:"oldest_pending_at,omitempty"`
	PendingAgeSeconds float64 `json:"pending_age_seconds"` // from OldestPendingAt to now; 0 without one
	DueTimers         int64   `json:"due_timers"`          // timers whose fire time is at or before now
	// OldestDueAt is the fire time of the most overdue timer; absent when none is due.
	OldestDueAt     string  `json:"oldest_due_at,omitempty"`
	TimerLagSeconds float64 `json:"timer_lag_seconds"` // from OldestDueAt to now; 0 when none is due
	Dead            int64   `json:"dead"`              // dead items
}

// RetentionTotals are the executions retention has deleted since the store's data was
// created, by status (DONE, FAILED, CANCELLED), and when the last were, by the deleter's
// clock (absent for never).
type RetentionTotals struct {
	Deleted map[string]int64 `json:"deleted"`
	LastAt  string           `json:"last_at,omitempty"`
}

// ReadBacklog reads the backlog of the executions collection coll at now and the retention
// totals of its counters collection counters: the aggregation execstore.Store.Backlog sends
// (a find instead on a server without its operators), then one find by _id.
func ReadBacklog(ctx context.Context, coll, counters *mongo.Collection, now time.Time) (*Backlog, error) {
	env := opsrun.Env{Executions: coll, Counters: counters}
	parts, err := opsrun.Backlog(ctx, env, now)
	if err != nil {
		return nil, fmt.Errorf("reading the backlog of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	totals, err := opsrun.RetentionTotals(ctx, env)
	if err != nil {
		return nil, fmt.Errorf("reading the retention totals of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	r := &Backlog{Now: FormatTime(now), Partitions: []PartitionBacklog{},
		Retention: RetentionTotals{Deleted: map[string]int64{}}}
	var all execstore.PartitionBacklog
	all.Now = now
	for _, p := range parts {
		r.Partitions = append(r.Partitions, PartitionBacklog{Partition: p.Partition, BacklogFigures: figuresOf(p)})
		all.PendingOutbox += p.PendingOutbox
		all.PendingSpawns += p.PendingSpawns
		all.DueTimers += p.DueTimers
		all.Dead += p.Dead
		if !p.OldestPending.IsZero() && (all.OldestPending.IsZero() || p.OldestPending.Before(all.OldestPending)) {
			all.OldestPending = p.OldestPending
		}
		if !p.OldestDue.IsZero() && (all.OldestDue.IsZero() || p.OldestDue.Before(all.OldestDue)) {
			all.OldestDue = p.OldestDue
		}
	}
	r.Total = figuresOf(all)
	for _, s := range []execstore.Status{execstore.Done, execstore.Failed, execstore.Cancelled} {
		r.Retention.Deleted[string(s)] = 0 // every finished status, even at none
	}
	for s, n := range totals.Deleted {
		r.Retention.Deleted[string(s)] = n
	}
	if !totals.LastAt.IsZero() {
		r.Retention.LastAt = FormatTime(totals.LastAt)
	}
	return r, nil
}

// figuresOf is b as the report shows it.
func figuresOf(b execstore.PartitionBacklog) BacklogFigures {
	f := BacklogFigures{PendingOutbox: b.PendingOutbox, PendingSpawns: b.PendingSpawns, DueTimers: b.DueTimers, Dead: b.Dead,
		PendingAgeSeconds: seconds(b.PendingAge()), TimerLagSeconds: seconds(b.TimerLag())}
	if !b.OldestPending.IsZero() {
		f.OldestPendingAt = FormatTime(b.OldestPending)
	}
	if !b.OldestDue.IsZero() {
		f.OldestDueAt = FormatTime(b.OldestDue)
	}
	return f
}
