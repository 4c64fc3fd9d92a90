package opsrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// CommitBatch runs the updates of plans (none of them a create; each with a distinct
// token) as one unordered bulk write, and returns each plan's outcome as Commit would:
// nil when it won, *execstore.AlreadyProcessedError, *execstore.ConflictError,
// *TraceMovedError, or a classified failure. A plan that lost and carries an event reports
// AlreadyProcessedError when its event is in the set, as Commit does.
//
// A bulk write reports how many CAS filters matched, not which. When not all of them did,
// one find reads back version and commit_token of every document, and each plan is settled:
//
//   - version == expected+1 with its own token: it won;
//   - version == expected: it was not applied (its event's dedupe guard, a trace-index guard
//     or a write error stopped it): a plan with an event whose set holds it is refused with
//     *execstore.AlreadyProcessedError; any other is run again alone, which is safe since it
//     certainly did not land;
//   - version == expected+1 with another token, a lower version, or no document: it lost;
//   - version > expected+1: it may have won before another commit moved on. These are settled
//     by the count: if the wins already known account for every match, they all lost; if the
//     matches left equal their number, they all won; otherwise their outcome is unknown.
//
// What the server's answer proves comes from outcome.Classify, the rule every write path uses:
//
//   - no answer, or one that proves nothing (a network error, a timeout, an interruption or
//     another command error after which some statements may have run): the bulk write may
//     still be running on the server. The read-back then settles only the wins (its own
//     token) and the certain losses (another commit wrote expected+1), and reports the rest
//     as outcome unknown. A win seen so is reported only once a read at majority read
//     concern confirms it (confirmDurable); else it too is outcome unknown;
//   - a write-concern error: every statement ran on the primary, but what was applied may be
//     rolled back by a failover. Losses are settled as above, and every plan that would have
//     won is reported as outcome unknown instead;
//   - a refusal of the whole command (auth, parse, validation): nothing was applied, and
//     every plan gets that refusal.
//
// The read-back reads the primary's latest state (Env.Primary: local read concern, primary
// read preference), whatever the store's read settings: a majority read could miss the
// competitor's write, or this bulk's own, and a secondary could lag. It runs on a context of
// settle's, started once the bulk write answered, not on ctx: it must settle the outcomes
// even when every caller has given up, and however long the bulk write took.
func CommitBatch(ctx context.Context, settle Settle, env Env, plans []*ops.CommitPlan) []error {
	errs := make([]error, len(plans))
	if err := ctx.Err(); err != nil {
		for i := range errs {
			errs[i] = err // not sent
		}
		return errs
	}
	res, err := env.Executions.BulkWrite(ctx, commitModels(plans), options.BulkWrite().SetOrdered(false))
	ans := answerBulk(res, err)
	switch {
	case err == nil && ans.matched == int64(len(plans)):
		return errs // every plan won
	case ans.refused:
		return settleBatch(plans, ans, nil, nil) // nothing was applied: no read-back
	}
	settleCtx, cancel := settle.Start()
	defer cancel()
	found, rerr := readBack(settleCtx, env, plans)
	if rerr != nil {
		cause := rerr
		if err != nil {
			cause = fmt.Errorf("%w (and the read-back failed: %v)", err, rerr)
		}
		for i, p := range plans {
			errs[i] = &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: p.ID, Err: cause}
		}
		return errs
	}
	rerun := make(map[*ops.CommitPlan]bool)
	errs = settleBatch(plans, ans, found, func(p *ops.CommitPlan) error {
		rerun[p] = true // Commit explains its own guard misses
		if err := recorded(ctx, env, p); err != nil {
			return err
		}
		return Commit(ctx, env, *p)
	})
	if !ans.answered {
		confirmDurable(settleCtx, env, plans, errs, err)
	}
	explainConflicts(settleCtx, env, plans, errs, rerun)
	return errs
}

// commitModels is the bulk write of plans, its statements in the global order (see
// statementOrder): by execution id, then by token. Settling does not depend on the order: the
// read-back is by id, and each plan's outcome is kept by its own index.
func commitModels(plans []*ops.CommitPlan) []mongo.WriteModel {
	order := statementOrder(len(plans), func(i int) string { return plans[i].ID }, func(i, j int) int {
		return cmp.Compare(plans[i].Token, plans[j].Token)
	})
	models := make([]mongo.WriteModel, len(plans))
	for k, i := range order {
		models[k] = mongo.NewUpdateOneModel().SetFilter(plans[i].Filter).SetUpdate(plans[i].Update)
	}
	return models
}

// recorded reads whether p's event is already in the dedupe set, and returns the
// *execstore.AlreadyProcessedError to report if it is; nil if it is not, if p has no event, or
// if the read fails (the caller then keeps what it knows).
func recorded(ctx context.Context, env Env, p *ops.CommitPlan) error {
	if p.EventID == "" {
		return nil
	}
	if st, err := readState(ctx, env, p.ID, p.EventID); err == nil && st.processed {
		return alreadyProcessed(p, st.version)
	}
	return nil
}

// explainConflictsAtOnce bounds the reads explainConflicts has in flight.
const explainConflictsAtOnce = 16

// explainConflicts turns into *execstore.AlreadyProcessedError the conflict of each plan that
// lost to another commit and whose event is in the dedupe set (Commit's rule: reloading
// would not make the event worth handling). The read-back reads versions only, so each such
// plan costs one more read, made concurrently with the others'; plans run again alone were
// explained by Commit already. If a read fails, the conflict, which is proven, stays.
func explainConflicts(ctx context.Context, env Env, plans []*ops.CommitPlan, errs []error, explained map[*ops.CommitPlan]bool) {
	var g errgroup.Group
	g.SetLimit(explainConflictsAtOnce)
	for i, p := range plans {
		var conflict *execstore.ConflictError
		if p.EventID == "" || explained[p] || !errors.As(errs[i], &conflict) {
			continue
		}
		g.Go(func() error {
			if err := recorded(ctx, env, p); err != nil {
				errs[i] = err
			}
			return nil
		})
	}
	_ = g.Wait()
}

// confirmDurable re-reads, at majority read concern, the plans of an unanswered bulk write
// that the read-back settled as won (errs[i] == nil), and turns into outcome unknown each one
// not yet majority-committed. A write seen on the primary may still be rolled back by a
// failover; an acknowledged write with a majority write concern could not, and a win
// settled without an answer must not promise less. (A win is durable when the majority
// snapshot shows its own token at its version, or a later version, which can only have been
// written on top of it.)
func confirmDurable(ctx context.Context, env Env, plans []*ops.CommitPlan, errs []error, cause error) {
	var won []*ops.CommitPlan
	for i, p := range plans {
		if errs[i] == nil {
			won = append(won, p)
		}
	}
	if len(won) == 0 {
		return
	}
	found, err := readBackFrom(ctx, env.durable(), won)
	for i, p := range plans {
		if errs[i] != nil {
			continue
		}
		if d, ok := found[p.ID]; err != nil || !ok || !durableWin(p, d) {
			errs[i] = &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: p.ID, Err: cause}
		}
	}
}

// durableWin reports whether a majority read-back d proves plan p's write committed.
func durableWin(p *ops.CommitPlan, d readBackDoc) bool {
	return d.Version > p.Expected+1 || (d.Version == p.Expected+1 && d.Token == p.Token)
}

// bulkAnswer is what the server said of a group commit's bulk write.
type bulkAnswer struct {
	// matched is how many CAS filters matched; -1 when unknown.
	matched int64
	// answered: the server answered, so every statement of the bulk is settled and a
	// read-back shows its final effect. When false the bulk may still be running.
	answered bool
	// notDurable: answered, but with a write-concern error; what was applied may still be
	// rolled back by a failover, so no plan can be reported as won.
	notDurable bool
	// refused: the whole command was refused before any statement ran.
	refused bool
	// err is the bulk write's error; nil when it succeeded.
	err error
}

// answerBulk says what a bulk write's result and error prove, by outcome.Classify.
func answerBulk(res *mongo.BulkWriteResult, err error) bulkAnswer {
	ans := bulkAnswer{matched: -1, answered: true, err: err}
	matched := int64(-1)
	if res != nil {
		matched = res.MatchedCount
	}
	if err == nil {
		ans.matched = matched
		return ans
	}
	switch outcome.Classify(err) {
	case outcome.Refused:
		if matched > 0 {
			// An earlier batch of a bulk the driver split ran before the refusal: settle
			// by reading back, as for write errors.
			ans.matched = matched
			break
		}
		ans.refused, ans.matched = true, 0
	case outcome.WriteErrors:
		ans.matched = matched
	case outcome.NotDurable:
		ans.matched, ans.notDurable = matched, true
	default:
		ans.answered = false
	}
	return ans
}

// settleBatch decides each plan's outcome from what the bulk write answered and from the
// read-back found. rerun runs a plan alone; it is used only for plans that certainly did not
// land. See CommitBatch for the rules.
func settleBatch(plans []*ops.CommitPlan, ans bulkAnswer, found map[string]readBackDoc,
	rerun func(*ops.CommitPlan) error) []error {
	errs := make([]error, len(plans))
	unknown := func(p *ops.CommitPlan, cause error) error {
		if cause == nil {
			cause = errAmbiguousBatch
		}
		return &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: p.ID, Err: cause}
	}
	won := func(p *ops.CommitPlan) error {
		if ans.notDurable {
			return unknown(p, ans.err) // applied on the primary, not (yet) durable
		}
		return nil
	}
	if ans.refused {
		for i, p := range plans {
			errs[i] = outcome.WriteFailure("commit", p.ID, ans.err)
		}
		return errs
	}
	var ambiguous []int
	wins := int64(0)
	for i, p := range plans {
		d, ok := found[p.ID]
		switch {
		case !ok && ans.answered:
			errs[i] = &execstore.ConflictError{ExecutionID: p.ID, Expected: p.Expected, Found: execstore.NoVersion}
		case !ok:
			errs[i] = unknown(p, ans.err)
		case d.Version == p.Expected+1 && d.Token == p.Token:
			wins++
			errs[i] = won(p)
		case d.Version == p.Expected+1 || (ans.answered && d.Version < p.Expected):
			errs[i] = &execstore.ConflictError{ExecutionID: p.ID, Expected: p.Expected, Found: d.Version}
		case !ans.answered:
			// The bulk write may still be running on the server: nothing else is provable.
			errs[i] = unknown(p, ans.err)
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
		case ans.matched >= 0 && ans.matched-wins == 0:
			errs[i] = &execstore.ConflictError{ExecutionID: p.ID, Expected: p.Expected, Found: found[p.ID].Version}
		case ans.matched >= 0 && ans.matched-wins == int64(len(ambiguous)):
			errs[i] = won(p)
		default:
			errs[i] = unknown(p, ans.err)
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

func readBack(ctx context.Context, env Env, plans []*ops.CommitPlan) (map[string]readBackDoc, error) {
	return readBackFrom(ctx, env.primary(), plans)
}

func readBackFrom(ctx context.Context, coll *mongo.Collection, plans []*ops.CommitPlan) (map[string]readBackDoc, error) {
	ids := make(bson.A, 0, len(plans))
	for _, p := range plans {
		ids = append(ids, p.ID)
	}
	cur, err := coll.Find(ctx, bson.D{{Key: fID, Value: bson.D{{Key: "$in", Value: ids}}}},
		options.Find().SetProjection(bson.D{{Key: ops.FieldVersion, Value: 1}, {Key: ops.FieldCommitToken, Value: 1}}))
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
