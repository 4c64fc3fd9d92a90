package ops

import (
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
)

func TestSetToken(t *testing.T) {
	env := Env{Profile: MongoDB, TraceMax: 10}
	p, err := BuildCommit(env, &execstore.Execution{ID: "x", Status: execstore.Running, Version: 2}, &execstore.Commit{}, Seqs{})
	require.NoError(t, err)
	p.SetToken(77)
	set := p.Update[0].Value.(bson.D)
	assert.Equal(t, bson.E{Key: "commit_token", Value: int64(77)}, set[len(set)-1])
	assert.EqualValues(t, 77, p.Token)
}

type settleCase struct {
	name     string
	expected int64
	token    int64
	found    *readBackDoc
	want     string // "won", "conflict:<found>", "unknown", "rerun"
}

func outcome(err error, reran bool) string {
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
	}
	return "error:" + err.Error()
}

func runSettle(t *testing.T, matched int64, answered bool, cases []settleCase) {
	t.Helper()
	var plans []*CommitPlan
	found := map[string]readBackDoc{}
	for i, c := range cases {
		id := string(rune('a' + i))
		plans = append(plans, &CommitPlan{ID: id, Expected: c.expected, Token: c.token})
		if c.found != nil {
			d := *c.found
			d.ID = id
			found[id] = d
		}
	}
	reran := map[string]bool{}
	var bulkErr error
	if !answered {
		bulkErr = errors.New("connection reset")
	}
	errs := settleBatch(plans, matched, answered, bulkErr, found, func(p *CommitPlan) error {
		reran[p.ID] = true
		return nil
	})
	for i, c := range cases {
		assert.Equal(t, c.want, outcome(errs[i], reran[plans[i].ID]), c.name)
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

// Many LoadForEvent calls in one aggregation (MongoDB): match by _id $in, and pick each
// document's own event id by its position in ids before the server-side $in.
func TestLoadForEventsPipeline(t *testing.T) {
	p := LoadForEventsPipeline(Env{}, []string{"a", "b"}, []string{"ea", "eb"})
	require.Len(t, p, 2)
	assert.Equal(t, bson.D{{Key: "$match", Value: bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{"a", "b"}}}}}}}, p[0])
	project := p[1][0].Value.(bson.D)
	assert.Equal(t, bson.E{Key: "hit", Value: bson.D{{Key: "$in", Value: bson.A{
		bson.D{{Key: "$arrayElemAt", Value: bson.A{
			bson.D{{Key: "$literal", Value: bson.A{"ea", "eb"}}},
			bson.D{{Key: "$indexOfArray", Value: bson.A{bson.D{{Key: "$literal", Value: bson.A{"a", "b"}}}, "$_id"}}},
		}}},
		bson.D{{Key: "$ifNull", Value: bson.A{"$processed", bson.A{}}}},
	}}}}, project[len(project)-1])
}

func TestIdempotentWrites(t *testing.T) {
	w := OutboxAckWrite("x", 5)
	assert.Equal(t, outboxField.AckFilter("x", 5), w.Filter)
	assert.Equal(t, outboxField.AckUpdate(5), w.Update)
	w = SpawnAckWrite("y", 6)
	assert.Equal(t, bson.D{{Key: "_id", Value: "y"}, {Key: "spawns.6", Value: bson.D{{Key: "$exists", Value: true}}}}, w.Filter)
}
