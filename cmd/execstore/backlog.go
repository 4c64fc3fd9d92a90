package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/ops"
)

// backlogOptions are what `backlog` reads.
type backlogOptions struct {
	output
	Collection string // the executions collection; its counters are in ops.CountersCollection
}

// showBacklog prints the work waiting per partition and the retention totals: the one
// aggregation execstore.Store.Backlog sends (a find instead on a server without its
// operators), then one find of the counters.
func showBacklog(ctx context.Context, db *mongo.Database, w io.Writer, o backlogOptions) error {
	r, err := inspect.ReadBacklog(ctx, db.Collection(o.Collection), db.Collection(ops.CountersCollection), o.Now)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeBacklog)
}

// writeBacklog writes the backlog for people.
func writeBacklog(w io.Writer, r *inspect.Backlog) error {
	if len(r.Partitions) == 0 {
		fmt.Fprintf(w, "backlog: nothing waiting (now %s)\n", r.Now)
	} else {
		fmt.Fprintf(w, "backlog: %s with work waiting (now %s)\n", plural(len(r.Partitions), "partition", "partitions"), r.Now)
		rows := make([][]string, 0, len(r.Partitions)+1)
		for _, p := range r.Partitions {
			rows = append(rows, backlogRow(strconv.Itoa(p.Partition), p.BacklogFigures))
		}
		rows = append(rows, backlogRow("total", r.Total))
		header := []string{"PARTITION", "OUTBOX", "SPAWNS", "OLDEST WAITING", "DUE TIMERS", "MOST LATE BY", "DEAD"}
		if err := table(w, "  ", header, rows); err != nil {
			return err
		}
	}
	statuses := slices.Sorted(func(yield func(string) bool) {
		for s := range r.Retention.Deleted {
			if !yield(s) {
				return
			}
		}
	})
	parts := make([]string, len(statuses))
	for i, s := range statuses {
		parts[i] = strconv.FormatInt(r.Retention.Deleted[s], 10) + " " + plain(s)
	}
	last := "never"
	if r.Retention.LastAt != "" {
		last = r.Retention.LastAt + " (" + relativeTo(r.Retention.LastAt, r.Now) + ")"
	}
	_, err := fmt.Fprintf(w, "\nretention: deleted %s; last %s\n", strings.Join(parts, ", "), last)
	return err
}

// backlogRow is one row of the backlog's table: ages as short durations, "-" for none.
func backlogRow(name string, f inspect.BacklogFigures) []string {
	age := func(at string, s float64) string {
		if at == "" {
			return "-"
		}
		return inspect.ShortDuration(time.Duration(s * float64(time.Second)).Round(time.Second))
	}
	return []string{name, strconv.FormatInt(f.PendingOutbox, 10), strconv.FormatInt(f.PendingSpawns, 10),
		age(f.OldestPendingAt, f.PendingAgeSeconds), strconv.FormatInt(f.DueTimers, 10),
		age(f.OldestDueAt, f.TimerLagSeconds), strconv.FormatInt(f.Dead, 10)}
}
