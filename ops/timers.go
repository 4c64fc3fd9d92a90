package ops

import (
	"context"
	"sort"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
)

// TimersPendingFilter selects the documents that hold at least one timer.
func TimersPendingFilter() bson.D {
	return bson.D{{Key: fTimers, Value: bson.D{{Key: "$ne", Value: bson.D{}}}}}
}

// DueTimers returns up to limit timers (0: all) with fire_at <= now, earliest first (ties by
// execution id, then path). One find projecting only the timers; every fire time is checked
// here, so a filter the server applies loosely cannot produce a timer that is not due.
func DueTimers(ctx context.Context, env Env, now float64, limit int) ([]execstore.DueTimer, error) {
	cur, err := env.Executions.Find(ctx, TimersPendingFilter(),
		options.Find().SetProjection(bson.D{{Key: fTimers, Value: 1}}))
	if err != nil {
		return nil, readFailure("due timers", "", err)
	}
	defer cur.Close(ctx)
	var out []execstore.DueTimer
	for cur.Next(ctx) {
		var doc struct {
			ID     string             `bson:"_id"`
			Timers map[string]float64 `bson:"timers"`
		}
		if err := cur.Decode(&doc); err != nil {
			return nil, readFailure("due timers", "", err)
		}
		for key, at := range doc.Timers {
			if at > now {
				continue
			}
			path, ok := DecodeKey(key)
			if !ok {
				continue // not written by this store
			}
			out = append(out, execstore.DueTimer{ExecutionID: doc.ID, Path: path, FireAt: at})
		}
	}
	if err := cur.Err(); err != nil {
		return nil, readFailure("due timers", "", err)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.FireAt != b.FireAt {
			return a.FireAt < b.FireAt
		}
		if a.ExecutionID != b.ExecutionID {
			return a.ExecutionID < b.ExecutionID
		}
		return a.Path < b.Path
	})
	return limitTo(out, limit), nil
}

// DeleteTimerFilter and DeleteTimerUpdate remove the timer at path only while it still
// holds fireAt, so a re-schedule that raced the sweep survives.
func DeleteTimerFilter(id, path string, fireAt float64) bson.D {
	return bson.D{{Key: fID, Value: id}, {Key: fTimers + "." + EncodeKey(path), Value: fireAt}}
}

// DeleteTimerUpdate is the update half of DeleteTimer.
func DeleteTimerUpdate(path string) bson.D {
	return bson.D{{Key: "$unset", Value: bson.D{{Key: fTimers + "." + EncodeKey(path), Value: ""}}}}
}

// DeleteTimer runs the guarded delete and reports whether a timer was removed. One update.
func DeleteTimer(ctx context.Context, env Env, id, path string, fireAt float64) (bool, error) {
	res, err := env.Executions.UpdateOne(ctx, DeleteTimerFilter(id, path, fireAt), DeleteTimerUpdate(path))
	if err != nil {
		return false, writeFailure("delete timer", id, err)
	}
	return res.MatchedCount == 1, nil
}
