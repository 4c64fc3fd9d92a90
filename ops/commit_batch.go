package ops

import (
	"context"
	"errors"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
)

// fCommitToken marks the commit that wrote the current version; see RunCommitBatch.
const fCommitToken = "commit_token"

// SetToken makes the commit stamp the document with token, so that a group commit can tell
// afterwards whether this commit is the one that wrote the version it created.
func (p *CommitPlan) SetToken(token int64) {
	if p.Update == nil || token == 0 {
		return
	}
	set := p.Update[0].Value.(bson.D)
	p.Update[0].Value = append(set, bson.E{Key: fCommitToken, Value: token})
	p.Token = token
}

// RunCommitBatch runs the updates of plans (none of them a create; each with a distinct
// token) as one unordered bulk write, and returns each plan's outcome as RunCommit would:
// nil when it won, *execstore.ConflictError, *TraceMovedError, or a classified failure.
//
// A bulk write reports how many CAS filters matched, not which. When not all of them did,
// one find reads back version and commit_token of every document, and each plan is settled:
//
//   - version == expected+1 with its own token: it won;
//   - version == expected: it was not applied (a trace-index guard or a write error stopped
//     it): it is run again alone, which is safe since it certainly did not land;
//   - version == expected+1 with another token, a lower version, or no document: it lost;
//   - version > expected+1: it may have won before another commit moved on. These are settled
//     by the count: if the wins already known account for every match, they all lost; if the
//     matches left equal their number, they all won; otherwise their outcome is unknown.
//
// A bulk write whose answer never came back may still be running on the server: the read-back
// then settles only the wins (its own token) and the certain losses (another commit wrote
// expected+1), and reports the rest as outcome unknown.
//
// The read-back runs on settleCtx, not ctx: it must settle the outcomes even when every
// caller has given up, and it stops only when settleCtx ends.
func RunCommitBatch(ctx, settleCtx context.Context, env Env, plans []*CommitPlan) []error {
	errs := make([]error, len(plans))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err // not sent
		}
		return errs
	}
	models := make([]mongo.WriteModel, len(plans))
	for i, p := range plans {
		models[i] = mongo.NewUpdateOneModel().SetFilter(p.Filter).SetUpdate(p.Update)
	}
	res, err := env.Executions.BulkWrite(ctx, models, options.BulkWrite().SetOrdered(false))
	matched := int64(-1) // unknown
	if err == nil {
		matched = res.MatchedCount
		if matched == int64(len(plans)) {
			return errs
		}
	}
	// answered: the server answered the bulk write, so every operation of it is settled and
	// a read-back shows its final effect.
	var bulkErr error
	answered := true
	if err != nil {
		bulkErr = err
		var we mongo.BulkWriteException
		var ce mongo.CommandError
		switch {
		case errors.As(err, &we) && we.WriteConcernError == nil && len(we.WriteErrors) > 0:
			if res != nil {
				matched = res.MatchedCount
			}
		case errors.As(err, &ce) && !mongo.IsNetworkError(err) && !mongo.IsTimeout(err) &&
			!ce.HasErrorLabel("RetryableWriteError") && res != nil:
			matched = res.MatchedCount // the server refused the command
		default:
			answered = false
		}
	}
	found, rerr := readBack(settleCtx, env, plans)
	if rerr != nil {
		cause := bulkErr
		if cause == nil {
			cause = rerr
		}
		for i, p := range plans {
			errs[i] = &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: p.ID, Err: cause}
		}
		return errs
	}
	return settleBatch(plans, matched, answered, bulkErr, found, func(p *CommitPlan) error {
		return RunCommit(ctx, env, *p)
	})
}

// settleBatch decides each plan's outcome from what the bulk write answered (matched: how many
// CAS filters matched, -1 when unknown; answered: whether the server answered at all) and
// from the read-back found. rerun runs a plan alone; it is used only for plans that certainly
// did not land. See RunCommitBatch for the rules.
func settleBatch(plans []*CommitPlan, matched int64, answered bool, bulkErr error,
	found map[string]readBackDoc, rerun func(*CommitPlan) error) []error {
	errs := make([]error, len(plans))
	var ambiguous []int
	wins := int64(0)
	for i, p := range plans {
		d, ok := found[p.ID]
		switch {
		case !ok && answered:
			errs[i] = &execstore.ConflictError{ExecutionID: p.ID, Expected: p.Expected, Found: execstore.NoVersion}
		case !ok:
			errs[i] = &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: p.ID, Err: bulkErr}
		case d.Version == p.Expected+1 && d.Token == p.Token:
			wins++
		case d.Version == p.Expected+1 || (answered && d.Version < p.Expected):
			errs[i] = &execstore.ConflictError{ExecutionID: p.ID, Expected: p.Expected, Found: d.Version}
		case !answered:
			// The bulk write may still be running on the server: nothing else is provable.
			errs[i] = &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: p.ID, Err: bulkErr}
		case d.Version == p.Expected:
			// Certainly not applied: run it alone. A win here is not among the bulk's
			// matches, so it is not counted.
			errs[i] = rerun(p)
		default: // d.Version > p.Expected+1
			ambiguous = append(ambiguous, i)
		}
	}
	for _, i := range ambiguous {
		p := plans[i]
		switch {
		case matched >= 0 && matched-wins == 0:
			errs[i] = &execstore.ConflictError{ExecutionID: p.ID, Expected: p.Expected, Found: found[p.ID].Version}
		case matched >= 0 && matched-wins == int64(len(ambiguous)):
			errs[i] = nil
		default:
			cause := bulkErr
			if cause == nil {
				cause = errAmbiguousBatch
			}
			errs[i] = &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: p.ID, Err: cause}
		}
	}
	return errs
}

var errAmbiguousBatch = errors.New("a group commit matched fewer documents than it can attribute, and a later commit moved this execution on")

type readBackDoc struct {
	ID      string `bson:"_id"`
	Version int64  `bson:"version"`
	Token   int64  `bson:"commit_token"`
}

func readBack(ctx context.Context, env Env, plans []*CommitPlan) (map[string]readBackDoc, error) {
	ids := make(bson.A, 0, len(plans))
	for _, p := range plans {
		ids = append(ids, p.ID)
	}
	cur, err := env.Executions.Find(ctx, bson.D{{Key: fID, Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: fVersion, Value: 1}, {Key: fCommitToken, Value: 1}}))
	if err != nil {
		return nil, err
	}
	var docs []readBackDoc
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	out := make(map[string]readBackDoc, len(docs))
	for _, d := range docs {
		out[d.ID] = d
	}
	return out, nil
}
