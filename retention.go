package execstore

import (
	"context"
	"time"
)

// Finished reports whether s is a status an execution ends in: Done, Failed or Cancelled. A
// commit that writes a finished status records when (FinishedExecution.FinishedAt); a later
// commit may still move the execution on.
func (s Status) Finished() bool { return s == Done || s == Failed || s == Cancelled }

// Retention is how long a finished execution is kept, by its status, counted from the last
// commit that wrote it in that status: past it, and once it holds no pending entry, spawn
// intent, timer or dead item, a Retaining store may delete it. A duration of 0 or less keeps
// the executions of that status for ever; Off keeps every execution.
type Retention struct {
	Done      time.Duration
	Failed    time.Duration
	Cancelled time.Duration
	Off       bool
}

// DefaultRetention keeps Done and Cancelled executions 7 days and Failed ones 30 days, the
// time to look into a failure.
var DefaultRetention = Retention{Done: 7 * 24 * time.Hour, Failed: 30 * 24 * time.Hour, Cancelled: 7 * 24 * time.Hour}

// Cutoffs returns, for each finished status with a retention, the finish time at or before
// which an execution in it is past its retention at now; nil when r keeps everything.
func (r Retention) Cutoffs(now time.Time) map[Status]time.Time {
	if r.Off {
		return nil
	}
	out := map[Status]time.Time{}
	for s, d := range map[Status]time.Duration{Done: r.Done, Failed: r.Failed, Cancelled: r.Cancelled} {
		if d > 0 {
			out[s] = now.Add(-d)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// FinishedExecution is an execution past its retention, as a Retaining store read it.
type FinishedExecution struct {
	ID         string
	Status     Status
	FinishedAt time.Time // the last commit that wrote it in Status, by its committer's clock
	Version    int64     // the version read: the delete is guarded by it
	ParentID   string    // "" for a root
}

// Retaining is a Partitioned store that deletes its finished executions once past their
// retention (relay.Options.Retention runs it). A parent and its children are retained each on
// its own: deleting a parent leaves its children's ParentID naming an execution that Load no
// longer finds.
type Retaining interface {
	Partitioned

	// ExpiredIn returns up to limit executions of the partitions whose status is finished
	// and past its cutoff (FinishedAt at or before cutoffs[Status]; a status absent from
	// cutoffs is kept) and that hold no pending entry or intent, no timer and no dead item,
	// in no particular order.
	ExpiredIn(ctx context.Context, partitions []int, cutoffs map[Status]time.Time, limit int) ([]FinishedExecution, error)

	// DeleteExpired deletes each of expired that is still as it was read: at the same
	// version, and still finished past its cutoff with nothing held, so an execution a commit
	// moved on since is kept. It returns the number deleted, by status, and counts them in
	// the store's retention totals (RetentionTotals).
	DeleteExpired(ctx context.Context, expired []FinishedExecution, cutoffs map[Status]time.Time) (map[Status]int64, error)

	// RetentionTotals returns the number of executions deleted for their retention since the
	// store's data was created, by status, and when the last were.
	RetentionTotals(ctx context.Context) (RetentionTotals, error)
}

// RetentionTotals is what a Retaining store has deleted for retention.
type RetentionTotals struct {
	Deleted map[Status]int64
	LastAt  time.Time // when the last delete was counted, by its deleter's clock; zero for never
}
