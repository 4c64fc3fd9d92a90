package opsrun

import (
	"context"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// IdempotentWrite is one guarded update whose repetition is harmless (an ack): applying it
// twice leaves the document as applying it once.
type IdempotentWrite struct {
	Op     string // "ack outbox", "ack spawn"
	ID     string
	Filter bson.D
	Update bson.D
	merge  removal // how it may share a statement with others (merged.go)
	// lastTimer is set for a timer delete: on the MongoDB profile a bulk sends it as two
	// statements (ops.DeleteLastTimerCommand, then ops.DeleteTimerBesidesCommand).
	lastTimer *timerRef
}

// timerRef names one timer: its execution, path, fire time and arming version (0: any).
type timerRef struct {
	id, path string
	fireAt   time.Time
	version  int64
}

// merged turns filter and update, a statement that deletes the timer among other writes of
// its document (documentStatement), into its two forms: lastFilter, with the timer's guard
// replaced by FieldTimers holding that timer alone, and lastUpdate, which removes the hint
// too; besidesFilter, with FieldTimers holding another timer as well. The guard's place and
// form are ops.DeleteTimerCommand's.
func (t *timerRef) merged(filter, update bson.D) (lastFilter, besidesFilter, lastUpdate bson.D) {
	last, _ := ops.DeleteLastTimerCommand(t.id, t.path, t.fireAt, t.version)
	besides, _ := ops.DeleteTimerBesidesCommand(t.id, t.path, t.fireAt, t.version)
	guard, _ := ops.DeleteTimerCommand(t.id, t.path, t.fireAt, t.version)
	for _, e := range filter {
		if e.Key == guard[1].Key {
			lastFilter = append(lastFilter, last[1])
			continue
		}
		lastFilter = append(lastFilter, e)
	}
	besidesFilter = append(append(bson.D{}, filter...), besides[len(besides)-1])
	for _, e := range update {
		if e.Key == "$unset" {
			unset := append(append(bson.D{}, e.Value.(bson.D)...), bson.E{Key: ops.FieldTimerMin, Value: ""})
			e = bson.E{Key: "$unset", Value: unset}
		}
		lastUpdate = append(lastUpdate, e)
	}
	return lastFilter, besidesFilter, lastUpdate
}

// statements are the two updateOnes of a timer delete on the MongoDB profile.
func (t *timerRef) statements() (last, besides mongo.WriteModel) {
	f1, u1 := ops.DeleteLastTimerCommand(t.id, t.path, t.fireAt, t.version)
	f2, u2 := ops.DeleteTimerBesidesCommand(t.id, t.path, t.fireAt, t.version)
	return mongo.NewUpdateOneModel().SetFilter(f1).SetUpdate(u1), mongo.NewUpdateOneModel().SetFilter(f2).SetUpdate(u2)
}

// OutboxAckWrite is ops.AckOutboxCommand as an IdempotentWrite.
func OutboxAckWrite(sourceID string, seq int64) IdempotentWrite {
	filter, update := ops.AckOutboxCommand(sourceID, seq)
	return IdempotentWrite{Op: "ack outbox", ID: sourceID, Filter: filter, Update: update, merge: removalOf("ack outbox", filter, update)}
}

// SpawnAckWrite is ops.AckSpawnCommand as an IdempotentWrite.
func SpawnAckWrite(parentID string, seq int64) IdempotentWrite {
	filter, update := ops.AckSpawnCommand(parentID, seq)
	return IdempotentWrite{Op: "ack spawn", ID: parentID, Filter: filter, Update: update, merge: removalOf("ack spawn", filter, update)}
}

// DeleteTimerWrite is ops.DeleteTimerCommand as an IdempotentWrite.
func DeleteTimerWrite(id, path string, fireAt time.Time, version int64) IdempotentWrite {
	filter, update := ops.DeleteTimerCommand(id, path, fireAt, version)
	r := removalOf("delete timer", filter, update)
	r.kind += " " + r.path // one path per merged statement: each document's is unset
	return IdempotentWrite{Op: "delete timer", ID: id, Filter: filter, Update: update, merge: r,
		lastTimer: &timerRef{id: id, path: path, fireAt: fireAt, version: version}}
}

// removalOf is the removal of an ack's or a timer delete's command: its filter is {_id, path:
// guard[, more guards]}, its update the $unset of path (and of a timer's arming version,
// also) and, for an ack, the $inc of the count by -1.
func removalOf(kind string, filter, update bson.D) removal {
	r := removal{kind: kind, path: filter[1].Key}
	for _, e := range update[0].Value.(bson.D) {
		if e.Key != r.path {
			r.also = append(r.also, e.Key)
		}
	}
	if len(update) > 1 {
		r.count = update[1].Value.(bson.D)[0].Key
	}
	return r
}

// IdempotentWrites runs writes as one unordered bulk write and returns each one's outcome.
// Since each write is idempotent, a write that matched nothing is done too (its entry was
// already gone). When the server refused part of the bulk (its per-operation error indexes
// are not reliable on every server), every write is run again alone, which is harmless, and
// reports its own result. On the MongoDB profile, a timer delete is two statements
// (ops.DeleteLastTimerCommand, then ops.DeleteTimerBesidesCommand), so that the delete of an
// execution's last timer removes its hint too. On the FerretDB profile, writes all of one kind are merged into
// few updateMany statements (merged.go). Any other error is classified as for a single write (see
// outcome.Classify): a refusal of the whole command is reported to every write, and a bulk write
// whose answer never came back, or proves nothing, leaves every write's outcome unknown.
func IdempotentWrites(ctx context.Context, env Env, writes []IdempotentWrite) []error {
	errs := make([]error, len(writes))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	_, err := env.Executions.BulkWrite(ctx, idempotentModels(env, writes), options.BulkWrite().SetOrdered(false))
	if err == nil {
		return errs
	}
	if outcome.Classify(err) == outcome.WriteErrors {
		for i, w := range writes {
			if _, err := env.Executions.UpdateOne(ctx, w.Filter, w.Update); err != nil {
				errs[i] = outcome.WriteFailure(w.Op, w.ID, err)
			}
		}
		return errs
	}
	for i, w := range writes {
		errs[i] = outcome.WriteFailure(w.Op, w.ID, err)
	}
	return errs
}

// idempotentModels is the bulk write of writes, its statements in the global order (see
// statementOrder): by _id, then by operation and filter. On the FerretDB profile, writes of
// one kind are merged (mergedModels).
func idempotentModels(env Env, writes []IdempotentWrite) []mongo.WriteModel {
	order := statementOrder(len(writes), func(i int) string { return writes[i].ID }, func(i, j int) int {
		return compareStatements(writes[i].Op, writes[i].Filter, writes[j].Op, writes[j].Filter)
	})
	if env.Profile == server.FerretDB {
		if models, ok := mergedModels(writes, order); ok {
			return models
		}
	}
	models := make([]mongo.WriteModel, 0, len(writes))
	for _, i := range order {
		w := writes[i]
		if w.lastTimer != nil && env.Profile != server.FerretDB {
			// The last-timer form, then the one that matches only beside other timers: at
			// most one of them removes the timer, and the first also removes the hint.
			last, besides := w.lastTimer.statements()
			models = append(models, last, besides)
			continue
		}
		models = append(models, mongo.NewUpdateOneModel().SetFilter(w.Filter).SetUpdate(w.Update))
	}
	return models
}

// IdempotentWritesChunked runs writes in bulk writes of at most max each, one after the
// other, and returns each write's outcome. The chunks follow the global statement order too.
func IdempotentWritesChunked(ctx context.Context, env Env, writes []IdempotentWrite, max int) []error {
	order := statementOrder(len(writes), func(i int) string { return writes[i].ID }, func(i, j int) int {
		return compareStatements(writes[i].Op, writes[i].Filter, writes[j].Op, writes[j].Filter)
	})
	errs := make([]error, len(writes))
	for len(order) > 0 {
		n := min(max, len(order))
		chunk := make([]IdempotentWrite, n)
		for k, i := range order[:n] {
			chunk[k] = writes[i]
		}
		for k, err := range IdempotentWrites(ctx, env, chunk) {
			errs[order[k]] = err
		}
		order = order[n:]
	}
	return errs
}
