package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
)

// timersOptions select the timers `timers` prints.
type timersOptions struct {
	output
	Collection string
	Limit      int // at least 1
}

// listTimers prints the earliest Limit timers: one find in the order of the executions'
// timer hints (see inspect.ReadTimers).
func listTimers(ctx context.Context, db *mongo.Database, w io.Writer, o timersOptions) error {
	r, err := inspect.ReadTimers(ctx, db.Collection(o.Collection), o.Limit, o.Now)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeTimers)
}

// writeTimers writes the earliest timers for people.
func writeTimers(w io.Writer, r *inspect.Timers) error {
	if len(r.Timers) == 0 {
		_, err := fmt.Fprintf(w, "timers: none (now %s)\n", r.Now)
		return err
	}
	fmt.Fprintf(w, "timers: %s due, %s upcoming", strconv.Itoa(r.Due), strconv.Itoa(len(r.Timers)-r.Due))
	if r.More {
		fmt.Fprint(w, "; more later (-limit N shows more)")
	}
	fmt.Fprintf(w, " (now %s)\n", r.Now)
	return timerTable(w, r.Timers, true)
}
