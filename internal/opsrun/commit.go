package opsrun

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/internal/unique"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// Commit executes plan. It returns nil when the commit won; when it did not, one read of
// the execution tells why, and nothing was written: a *execstore.AlreadyProcessedError when
// the plan's event is in the dedupe set (whatever the version), a *execstore.ConflictError
// when the version moved, a *TraceMovedError when only the trace index guard failed (rebuild
// with a fresh TraceNext). A write that failed is a classified write failure.
func Commit(ctx context.Context, env Env, plan ops.CommitPlan) error {
	if err := ctx.Err(); err != nil {
		return err // not sent: certainly not applied
	}
	if plan.Insert != nil {
		_, err := env.Executions.InsertOne(ctx, plan.Insert)
		if err == nil {
			return nil
		}
		if !unique.IsDuplicateKey(err) {
			return outcome.WriteFailure("commit", plan.ID, err)
		}
		st, rerr := readState(ctx, env, plan.ID, plan.EventID)
		if rerr != nil {
			return rerr
		}
		if st.processed {
			return alreadyProcessed(&plan, st.version)
		}
		return &execstore.ConflictError{ExecutionID: plan.ID, Expected: 0, Found: st.version}
	}
	res, err := env.Executions.UpdateOne(ctx, plan.Filter, plan.Update)
	if err != nil {
		return outcome.WriteFailure("commit", plan.ID, err)
	}
	if res.MatchedCount == 1 {
		return nil
	}
	st, err := readState(ctx, env, plan.ID, plan.EventID)
	if err != nil {
		return err
	}
	found, traceNext := st.version, st.traceNext
	if st.processed {
		return alreadyProcessed(&plan, found)
	}
	if found == plan.Expected {
		if len(plan.Acked) > 0 || len(plan.Fired) > 0 { // a carried removal's guard may be what missed
			return &CarriedGoneError{Acked: plan.Acked, Fired: plan.Fired}
		}
		if plan.Traced { // the trace guards are what missed
			if traceNext == plan.TraceNext-1 {
				// The index did not move: the trace has the other profile's shape.
				if err := repairTraceShape(ctx, env, plan.ID, traceNext); err != nil {
					return fmt.Errorf("execstore: commit of %q not applied: %w", plan.ID, err)
				}
			}
			return &TraceMovedError{TraceNext: traceNext}
		}
		return fmt.Errorf("execstore: commit of %q matched nothing at version %d, which the execution still has; nothing was written", plan.ID, found)
	}
	return &execstore.ConflictError{ExecutionID: plan.ID, Expected: plan.Expected, Found: found}
}

// CarriedGoneError reports a commit that carried removals (ops.CommitPlan.Acked and Fired)
// and matched nothing at the version it expected: an acked entry was gone already, acked by
// another write, the fired timer was deleted or re-armed, or another of its guards missed.
// Nothing was written; build it again without them (acked entries are removed apart, by
// writes that are no-ops where they are gone; a fired timer by the sweeper's guarded delete).
type CarriedGoneError struct {
	Acked []int64
	Fired []ops.FiredRef
}

func (e *CarriedGoneError) Error() string {
	return fmt.Sprintf("execstore: a commit carrying the acks of outbox seqs %v and the removal of %d fired timers matched nothing at its version", e.Acked, len(e.Fired))
}

// TraceMovedError reports a commit that lost only its trace guards: a concurrent AppendTrace
// took the index, or the trace had the other profile's shape and has just been converted.
// Nothing was written; retry with TraceNext.
type TraceMovedError struct{ TraceNext int64 }

func (e *TraceMovedError) Error() string { return "execstore: trace index moved" }

// stateProjection is the projection of readState's find on MongoDB: version, trace_next and,
// for an event, hit: whether the dedupe set holds it (a projection expression, MongoDB 4.4+).
func stateProjection(env Env, eventID string) bson.D {
	projection := bson.D{{Key: ops.FieldVersion, Value: 1}, {Key: ops.FieldTraceNext, Value: 1}}
	if eventID != "" {
		projection = append(projection, bson.E{Key: "hit", Value: hitExpr(env, literal(eventID))})
	}
	return projection
}

// alreadyProcessed is the error of plan's commit refused by its dedupe guard, its event found
// in the set of the stored version.
func alreadyProcessed(p *ops.CommitPlan, version int64) error {
	return &execstore.AlreadyProcessedError{ExecutionID: p.ID, EventID: p.EventID, Version: version}
}

// storedState is what readState read of an execution whose commit guard missed.
type storedState struct {
	version   int64 // NoVersion when there is no document
	traceNext int64
	processed bool // the event asked about is in the dedupe set
}

// readState reads the stored version and trace_next of id, and whether eventID ("" for none)
// is in its dedupe set, as the primary has them now (Env.Primary), in one round trip: on
// MongoDB a find with the membership computed on the server ($in over the dedupe set, which
// never leaves it); on FerretDB, which has no aggregation $in, a find that also returns the
// dedupe set. Its errors are reported as the outcome of the conflict check: the commit
// itself is known not to have been applied.
func readState(ctx context.Context, env Env, id, eventID string) (storedState, error) {
	if eventID != "" && env.Profile == server.FerretDB {
		d, err := findWithDedupeSet(ctx, env.primary(), env, id, stateProjection(env, ""))
		switch {
		case err != nil:
			return storedState{}, outcome.ReadFailure("conflict check", id, err)
		case d == nil:
			return storedState{version: execstore.NoVersion}, nil
		}
		return storedState{version: d.Exec.Version, traceNext: d.Exec.TraceNext, processed: d.Set.holds(eventID)}, nil
	}
	var d execDoc
	err := env.primary().FindOne(ctx, bson.D{{Key: fID, Value: id}},
		options.FindOne().SetProjection(stateProjection(env, eventID))).Decode(&d)
	if errors.Is(err, mongo.ErrNoDocuments) {
		return storedState{version: execstore.NoVersion}, nil
	}
	if err != nil {
		return storedState{}, outcome.ReadFailure("conflict check", id, err)
	}
	return storedState{version: d.Version, traceNext: d.TraceNext, processed: d.Hit}, nil
}
