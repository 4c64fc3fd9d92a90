package opsrun

import (
	"cmp"
	"context"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// RepairHintCommand moves a stale hint from old to the earliest fire time among the timers the
// sweep read at version (or removes it when there were none), only if the document is still at
// that version: timers are added only by commits, and every commit moves the version, so a
// timer scheduled after the read can never be left without its hint.
func RepairHintCommand(id string, version int64, old float64, remaining map[string]float64) (filter, update bson.D) {
	filter = bson.D{{Key: fID, Value: id}, {Key: ops.FieldVersion, Value: version}, {Key: ops.FieldTimerMin, Value: old}}
	first := true
	var min float64
	for _, at := range remaining {
		if first || at < min {
			min, first = at, false
		}
	}
	if first {
		return filter, bson.D{{Key: "$unset", Value: bson.D{{Key: ops.FieldTimerMin, Value: ""}}}}
	}
	return filter, bson.D{{Key: "$set", Value: bson.D{{Key: ops.FieldTimerMin, Value: min}}}}
}

// DueTimers returns up to limit timers (0: all) of the executions in partitions with fire_at
// <= now, earliest first (ties by execution id, then path). partitions must be distinct and in
// range; the whole store's sweep passes them all. One find over the documents of partitions
// whose hint is due, in hint order (ops.DueScan), that stops once no further document can
// hold an earlier timer than the limit already found. On MongoDB a document whose hint turned out stale (no timer due, and none within repairHorizon)
// gets its hint repaired by a guarded update, all of them in one bulk write, so that the index
// stops leading the sweep to it. On FerretDB hints are never repaired: its SQLite backend reads
// every document for this find whatever the hints say, so a repair would buy nothing and cost
// a write that scans the collection. Every fire time is checked here.
func DueTimers(ctx context.Context, env Env, partitions []int, now time.Time, limit int) ([]execstore.DueTimer, error) {
	return dueTimers(ctx, env, ops.DueScan(partitions, now), now, limit)
}

// DueTimersOf is DueTimers restricted to the executions ids, read by their _id
// (ops.DueScanOf). ids must be distinct.
func DueTimersOf(ctx context.Context, env Env, ids []string, now time.Time, limit int) ([]execstore.DueTimer, error) {
	return dueTimers(ctx, env, ops.DueScanOf(ids, now), now, limit)
}

// dueTimers runs scan, a find of documents whose hint is due at now (in hint order when
// scan has a Sort, and then it stops early), and returns up to limit of their due timers, as
// DueTimers says.
func dueTimers(ctx context.Context, env Env, scan ops.Scan, now time.Time, limit int) ([]execstore.DueTimer, error) {
	nowStored := contract.StoredTime(now)
	find := options.Find().
		SetProjection(bson.D{{Key: ops.FieldTimers, Value: 1}, {Key: ops.FieldTimerMin, Value: 1}, {Key: ops.FieldVersion, Value: 1},
			{Key: ops.FieldTimerFails, Value: 1}, {Key: ops.FieldTimerVersions, Value: 1}}).
		SetHint(scan.Hint)
	if scan.Sort != nil {
		find.SetSort(scan.Sort)
	}
	cur, err := env.Executions.Find(ctx, scan.Filter, find)
	if err != nil {
		return nil, outcome.ReadFailure("due timers", "", err)
	}
	defer cur.Close(ctx)
	type stale struct {
		id      string
		version int64
		hint    float64
		timers  map[string]float64
	}
	var out []execstore.DueTimer
	var repairs []stale
	for cur.Next(ctx) {
		var doc struct {
			ID       string                      `bson:"_id"`
			Timers   map[string]float64          `bson:"timers"`
			TimerMin *float64                    `bson:"timer_min"`
			Fails    map[string]ops.TimerFailDoc `bson:"timer_fails"`
			Armed    map[string]int64            `bson:"timer_v"`
			Version  int64                       `bson:"version"`
		}
		if err := cur.Decode(&doc); err != nil {
			return nil, outcome.ReadFailure("due timers", "", err)
		}
		if limit > 0 && len(out) >= limit {
			contract.SortDueTimers(out)
			out = out[:limit]
			if scan.Sort != nil && doc.TimerMin != nil && *doc.TimerMin > contract.StoredTime(out[limit-1].FireAt) {
				break // in hint order: every later document's timers fire after the limit found
			}
		}
		due := 0
		for key, at := range doc.Timers {
			if at > nowStored {
				continue
			}
			path, ok := ops.DecodeKey(key)
			fireAt, inRange := contract.TimeFromStored(at)
			if !ok || !inRange {
				continue // not written by this store
			}
			if fireAt.After(now) {
				continue // stored as now is, read back a little later: due at its FireAt
			}
			t := execstore.DueTimer{ExecutionID: doc.ID, Path: path, FireAt: fireAt, Version: doc.Armed[key]}
			if f, ok := doc.Fails[key]; ok && f.At == at {
				t.Attempts = attemptsOf(f.Failures)
			}
			out = append(out, t)
			due++
		}
		// A hint is stale when it was due and no timer is: a read of one id by _id alone
		// (ops.DueScanOf) also returns a document whose hint is not due, or that has none.
		if due == 0 && doc.TimerMin != nil && *doc.TimerMin <= nowStored && worthRepair(doc.Timers, nowStored) {
			repairs = append(repairs, stale{id: doc.ID, version: doc.Version, hint: *doc.TimerMin, timers: doc.Timers})
		}
	}
	if err := cur.Err(); err != nil {
		return nil, outcome.ReadFailure("due timers", "", err)
	}
	if len(repairs) > 0 && env.Profile != server.FerretDB {
		// In the global statement order (see statementOrder): by _id; a document is read
		// once, so it is repaired once.
		slices.SortFunc(repairs, func(a, b stale) int { return cmp.Compare(a.id, b.id) })
		models := make([]mongo.WriteModel, len(repairs))
		for i, r := range repairs {
			filter, update := RepairHintCommand(r.id, r.version, r.hint, r.timers)
			models[i] = mongo.NewUpdateOneModel().SetFilter(filter).SetUpdate(update)
		}
		// A repair that fails leaves a hint early: a later sweep reads that document once
		// more, nothing else.
		_, _ = env.Executions.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	}
	contract.SortDueTimers(out)
	return limitTo(out, limit), nil
}

// repairHorizon is how far beyond the sweep's now a stale hint's next timer must lie before
// the sweep repairs it. A document whose next timer is nearer is simply read again by the
// next sweeps until it is due (part of the same find), which costs less than a write.
const repairHorizon = 60.0

// worthRepair reports whether a document whose hint was due but which holds no due timer
// should have its hint repaired: when no timer is left, or the next one is far off. Fire
// times are the stored seconds.
func worthRepair(timers map[string]float64, now float64) bool {
	for _, at := range timers {
		if at <= now+repairHorizon {
			return false
		}
	}
	return true
}

// DeleteTimer runs ops.DeleteTimerCommand, with no arming version, and reports whether a
// timer was removed. One update.
func DeleteTimer(ctx context.Context, env Env, id, path string, fireAt time.Time) (bool, error) {
	filter, update := ops.DeleteTimerCommand(id, path, fireAt, 0)
	res, err := env.Executions.UpdateOne(ctx, filter, update)
	if err != nil {
		return false, outcome.WriteFailure("delete timer", id, err)
	}
	return res.MatchedCount == 1, nil
}

// RestoreTimer runs ops.RestoreTimerCommand and reports whether it put the timer back. One
// update.
func RestoreTimer(ctx context.Context, env Env, id, path string, fireAt time.Time, armed, version, token int64) (bool, error) {
	filter, update := ops.RestoreTimerCommand(id, path, fireAt, armed, version, token)
	res, err := env.Executions.UpdateOne(ctx, filter, update)
	if err != nil {
		return false, outcome.WriteFailure("restore timer", id, err)
	}
	return res.MatchedCount == 1, nil
}
