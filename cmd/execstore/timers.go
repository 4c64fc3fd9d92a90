package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/ops"
)

// timersOptions select the timers `timers` prints.
type timersOptions struct {
	output
	Collection string
	Limit      int // at least 1
}

// timersReport is the earliest timers across executions: the due ones (fire time at or
// before now) first, then the next ones.
type timersReport struct {
	Now    string  `json:"now"`
	Due    int     `json:"due"`      // of Timers
	Timers []timer `json:"timers"`   // by fire time, then execution, then path
	More   bool    `json:"has_more"` // the listing stopped at Limit: later timers may exist
}

// listTimers prints the earliest Limit timers. One find of the executions that hold a timer
// hint, sorted by it (no index serves it alone: the stores' lead with the partition).
// timer_min is at or before the execution's earliest fire time, so the scan stops at the
// first document whose hint is past the Limit-th fire time found. Unlike the stores' sweep, it never repairs a stale hint.
func listTimers(ctx context.Context, db *mongo.Database, w io.Writer, o timersOptions) error {
	coll := db.Collection(o.Collection)
	cur, err := coll.Find(ctx, bson.D{{Key: ops.FieldTimerMin, Value: bson.D{{Key: "$exists", Value: true}}}},
		options.Find().
			SetProjection(bson.D{{Key: ops.FieldTimers, Value: 1}, {Key: ops.FieldTimerMin, Value: 1}}).
			SetSort(bson.D{{Key: ops.FieldTimerMin, Value: 1}}))
	if err != nil {
		return fmt.Errorf("reading the timers of %s.%s: %w", db.Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &timersReport{Now: formatTime(o.Now)}
	var all []timer
	for cur.Next(ctx) {
		doc := cur.Current
		if len(all) >= o.Limit {
			sortTimers(all)
			hint, _ := doc.Lookup(ops.FieldTimerMin).AsFloat64OK()
			if hint > all[o.Limit-1].FireAtUnix {
				r.More = true
				break // every later document's timers fire after the ones kept
			}
		}
		ts, err := timersOf(doc, o.Now)
		if err != nil {
			return fmt.Errorf("execution %q: %w", str(doc, idField), err)
		}
		for _, t := range ts {
			t.Execution = str(doc, idField)
			all = append(all, t)
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("reading the timers of %s.%s: %w", db.Name(), coll.Name(), err)
	}
	sortTimers(all)
	if len(all) > o.Limit {
		all, r.More = all[:o.Limit], true
	}
	r.Timers = nonNil(all)
	for _, t := range r.Timers {
		if t.Due {
			r.Due++
		}
	}
	return emit(w, o.output, r)
}

func (r *timersReport) writeText(w io.Writer) error {
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
