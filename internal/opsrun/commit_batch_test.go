package opsrun

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/ops"
)

type settleCase struct {
	name     string
	expected int64
	token    int64
	found    *readBackDoc
	want     string // "won", "conflict:<found>", "unknown", "rerun"
}

func planOutcome(err error, reran bool) string {
	var ce *execstore.ConflictError
	switch {
	case reran && err == nil:
		return "rerun"
	case err == nil:
		return "won"
	case errors.As(err, &ce) && ce.Found == execstore.NoVersion:
		return "conflict:none"
	case errors.As(err, &ce):
		return "conflict:" + strconv.FormatInt(ce.Found, 10)
	case errors.Is(err, execstore.ErrOutcomeUnknown):
		return "unknown"
	case errors.Is(err, execstore.ErrInvalid):
		return "invalid"
	case strings.Contains(err.Error(), "refused by the server"):
		return "refused"
	}
	return "error:" + err.Error()
}

func runSettle(t *testing.T, matched int64, answered bool, cases []settleCase) {
	t.Helper()
	ans := bulkAnswer{matched: matched, answered: answered}
	if !answered {
		ans.err = errors.New("connection reset")
	}
	runSettleAnswer(t, ans, cases)
}

func runSettleAnswer(t *testing.T, ans bulkAnswer, cases []settleCase) {
	t.Helper()
	var plans []*ops.CommitPlan
	found := map[string]readBackDoc{}
	for i, c := range cases {
		id := string(rune('a' + i))
		plans = append(plans, &ops.CommitPlan{ID: id, Expected: c.expected, Token: c.token})
		if c.found != nil {
			d := *c.found
			d.ID = id
			found[id] = d
		}
	}
	reran := map[string]bool{}
	errs := settleBatch(plans, ans, found, func(p *ops.CommitPlan) error {
		reran[p.ID] = true
		return nil
	})
	for i, c := range cases {
		assert.Equal(t, c.want, planOutcome(errs[i], reran[plans[i].ID]), c.name)
	}
}

func TestSettleBatchCertain(t *testing.T) {
	runSettle(t, 1, true, []settleCase{
		{"own token at expected+1", 4, 11, &readBackDoc{Version: 5, Token: 11}, "won"},
		{"another token at expected+1", 4, 12, &readBackDoc{Version: 5, Token: 99}, "conflict:5"},
		{"no document", 4, 13, nil, "conflict:none"},
		{"behind", 4, 14, &readBackDoc{Version: 2, Token: 1}, "conflict:2"},
		{"unchanged: certainly not applied, run alone", 4, 15, &readBackDoc{Version: 4, Token: 1}, "rerun"},
	})
}

func TestSettleBatchAmbiguousByCount(t *testing.T) {
	// One certain win; two documents moved past expected+1.
	moved := func() *readBackDoc { return &readBackDoc{Version: 9, Token: 1} }
	runSettle(t, 1, true, []settleCase{ // every match is the certain win: the moved ones lost
		{"win", 1, 5, &readBackDoc{Version: 2, Token: 5}, "won"},
		{"moved a", 1, 6, moved(), "conflict:9"},
		{"moved b", 1, 7, moved(), "conflict:9"},
	})
	runSettle(t, 3, true, []settleCase{ // the matches left equal the moved ones: they won
		{"win", 1, 5, &readBackDoc{Version: 2, Token: 5}, "won"},
		{"moved a", 1, 6, moved(), "won"},
		{"moved b", 1, 7, moved(), "won"},
	})
	runSettle(t, 2, true, []settleCase{ // one of the two won, which one is unknowable
		{"win", 1, 5, &readBackDoc{Version: 2, Token: 5}, "won"},
		{"moved a", 1, 6, moved(), "unknown"},
		{"moved b", 1, 7, moved(), "unknown"},
	})
	runSettle(t, -1, true, []settleCase{ // count unknown
		{"moved", 1, 6, moved(), "unknown"},
	})
}

func TestSettleBatchUnanswered(t *testing.T) {
	// The bulk write may still be running: only its own token and another's expected+1 are
	// proof; nothing is run again.
	runSettle(t, -1, false, []settleCase{
		{"own token", 4, 11, &readBackDoc{Version: 5, Token: 11}, "won"},
		{"another token", 4, 12, &readBackDoc{Version: 5, Token: 3}, "conflict:5"},
		{"unchanged", 4, 13, &readBackDoc{Version: 4}, "unknown"},
		{"behind", 4, 14, &readBackDoc{Version: 3}, "unknown"},
		{"no document", 4, 15, nil, "unknown"},
		{"moved", 4, 16, &readBackDoc{Version: 8}, "unknown"},
	})
}

// From the driver's own error types to the outcome each plan of a group commit gets: the
// bulk write's error is classified by the rule every write path uses, then the plans are
// settled against one read-back of the primary.
func TestGroupCommitOutcomeByDriverError(t *testing.T) {
	// The read-back, the same for every row: a won its own write, b lost to another commit,
	// c is unchanged, d moved two versions on, e has no document.
	cases := func(won, unchanged, moved, gone string) []settleCase {
		lost := "conflict:5"
		if won == "refused" {
			lost = "refused"
		}
		return []settleCase{
			{"own token at expected+1", 4, 11, &readBackDoc{Version: 5, Token: 11}, won},
			{"another token at expected+1", 4, 12, &readBackDoc{Version: 5, Token: 99}, lost},
			{"unchanged", 4, 13, &readBackDoc{Version: 4, Token: 1}, unchanged},
			{"moved on", 4, 14, &readBackDoc{Version: 7, Token: 1}, moved},
			{"no document", 4, 15, nil, gone},
		}
	}
	res := func(matched int64) *mongo.BulkWriteResult { return &mongo.BulkWriteResult{MatchedCount: matched} }
	wce := &mongo.WriteConcernError{Code: 64, Name: "WriteConcernFailed", Message: "waiting for replication timed out"}
	casErr := mongo.BulkWriteException{WriteErrors: []mongo.BulkWriteError{{WriteError: mongo.WriteError{Index: 2, Code: 2, Message: "bad"}}}}
	for _, tc := range []struct {
		name  string
		res   *mongo.BulkWriteResult
		err   error
		cases []settleCase
	}{
		{"success, some filters missed", res(1), nil, cases("won", "rerun", "conflict:7", "conflict:none")},
		{"success, the moved one counted", res(2), nil, cases("won", "rerun", "won", "conflict:none")},
		{"write errors: answered", res(1), casErr, cases("won", "rerun", "conflict:7", "conflict:none")},
		{"write-concern error: no win is durable", res(2),
			mongo.BulkWriteException{WriteConcernError: wce},
			cases("unknown", "rerun", "unknown", "conflict:none")},
		{"write-concern error with write errors", res(1),
			mongo.BulkWriteException{WriteConcernError: wce, WriteErrors: casErr.WriteErrors},
			cases("unknown", "rerun", "conflict:7", "conflict:none")},
		{"write-concern error labelled as a timeout", res(1),
			mongo.BulkWriteException{WriteConcernError: &mongo.WriteConcernError{Code: 50, Name: "MaxTimeMSExpired"}, Labels: []string{"ExceededTimeLimitError"}},
			cases("unknown", "rerun", "conflict:7", "conflict:none")},
		{"interrupted (ok: 0, some statements may have run)", res(0),
			mongo.CommandError{Code: 11601, Name: "Interrupted"}, cases("won", "unknown", "unknown", "unknown")},
		{"shutdown", res(0),
			mongo.CommandError{Code: 11600, Name: "InterruptedAtShutdown"}, cases("won", "unknown", "unknown", "unknown")},
		{"killOp", res(0),
			mongo.CommandError{Code: 237, Name: "CursorKilled"}, cases("won", "unknown", "unknown", "unknown")},
		{"stepped down, retryable", nil,
			mongo.CommandError{Code: 189, Name: "PrimarySteppedDown", Labels: []string{"RetryableWriteError"}}, cases("won", "unknown", "unknown", "unknown")},
		{"unlabelled error of unknown code on a retry", nil,
			mongo.CommandError{Code: 91, Name: "ShutdownInProgress"}, cases("won", "unknown", "unknown", "unknown")},
		{"network error", nil,
			mongo.CommandError{Code: 6, Labels: []string{"NetworkError"}}, cases("won", "unknown", "unknown", "unknown")},
		{"context ended", nil, context.DeadlineExceeded, cases("won", "unknown", "unknown", "unknown")},
		{"unauthorized: refused, nothing applied", res(0),
			mongo.CommandError{Code: 13, Name: "Unauthorized"}, cases("refused", "refused", "refused", "refused")},
		{"failed to parse: refused", res(0),
			mongo.CommandError{Code: 9, Name: "FailedToParse"}, cases("refused", "refused", "refused", "refused")},
		{"refused after an earlier batch of the bulk ran", res(1),
			mongo.CommandError{Code: 13, Name: "Unauthorized"}, cases("won", "rerun", "conflict:7", "conflict:none")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runSettleAnswer(t, answerBulk(tc.res, tc.err), tc.cases)
		})
	}
}

// A win settled without an answer is reported only when the majority snapshot shows it: its
// own token at its version, or a later version written on top of it.
func TestDurableWin(t *testing.T) {
	p := &ops.CommitPlan{Expected: 4, Token: 11}
	assert.True(t, durableWin(p, readBackDoc{Version: 5, Token: 11}), "own token")
	assert.True(t, durableWin(p, readBackDoc{Version: 6, Token: 3}), "a later version")
	assert.False(t, durableWin(p, readBackDoc{Version: 4, Token: 1}), "not yet majority-committed")
	assert.False(t, durableWin(p, readBackDoc{Version: 5, Token: 12}), "another commit's version")
}
