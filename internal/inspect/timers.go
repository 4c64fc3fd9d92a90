package inspect

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/ops"
)

// Timers is the earliest timers across executions: the due ones (fire time at or before
// now) first, then the next ones.
type Timers struct {
	Now    string  `json:"now"`
	Due    int     `json:"due"`      // of Timers
	Timers []Timer `json:"timers"`   // by fire time, then execution, then path
	More   bool    `json:"has_more"` // the listing stopped at its limit: later timers may exist
}

// ReadTimers reads the earliest limit timers of the executions collection coll, due at or
// before now. One find of the executions that hold a timer hint, sorted by it (no index
// serves it alone: the stores' lead with the partition). timer_min is at or before the
// execution's earliest fire time, so the scan stops at the first document whose hint is past
// the limit-th fire time found. Unlike the stores' sweep, it never repairs a stale hint.
func ReadTimers(ctx context.Context, coll *mongo.Collection, limit int, now time.Time) (*Timers, error) {
	cur, err := coll.Find(ctx, bson.D{{Key: ops.FieldTimerMin, Value: bson.D{{Key: "$exists", Value: true}}}},
		options.Find().
			SetProjection(bson.D{{Key: ops.FieldTimers, Value: 1}, {Key: ops.FieldTimerMin, Value: 1}}).
			SetSort(bson.D{{Key: ops.FieldTimerMin, Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("reading the timers of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &Timers{Now: FormatTime(now)}
	var all []Timer
	for cur.Next(ctx) {
		doc := cur.Current
		if len(all) >= limit {
			sortTimers(all)
			hint, _ := doc.Lookup(ops.FieldTimerMin).AsFloat64OK()
			if hint > all[limit-1].FireAtUnix {
				r.More = true
				break // every later document's timers fire after the ones kept
			}
		}
		ts, err := timersOf(doc, now)
		if err != nil {
			return nil, fmt.Errorf("execution %q: %w", str(doc, idField), err)
		}
		for _, t := range ts {
			t.Execution = str(doc, idField)
			all = append(all, t)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("reading the timers of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	sortTimers(all)
	if len(all) > limit {
		all, r.More = all[:limit], true
	}
	r.Timers = nonNil(all)
	for _, t := range r.Timers {
		if t.Due {
			r.Due++
		}
	}
	return r, nil
}
