package deadaction

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/aiotest"
	"github.com/execstore/execstore/internal/logtest"
	"github.com/execstore/execstore/internal/testserver"
)

var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

var (
	bg     = context.Background()
	failAt = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	fire   = time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)
)

// deadFixture commits an execution with two entries and a timer, and moves an entry and the
// timer to dead: it returns the store, the executions collection and the dead items.
func deadFixture(t *testing.T) (*aio.Store, *mongo.Collection, []execstore.ItemRef, execstore.ItemRef) {
	t.Helper()
	var opts aio.Options
	opts.Database = testserver.Database(t, "da")
	s, db := aiotest.Open(t, srv.URI, opts)
	exe := &execstore.Execution{ID: "pay-1", DefinitionID: "pay", Status: execstore.Running}
	seqs, err := s.Commit(bg, exe, execstore.Commit{
		Emits:  []execstore.Emit{{TargetID: "t", Event: []byte(`{"type":"charge"}`)}, {TargetID: "t", Event: []byte("b")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("remind", fire)},
	})
	require.NoError(t, err)
	dead := []execstore.ItemRef{
		{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[0]},
		{Kind: execstore.TimerItem, ExecutionID: exe.ID, Path: "remind", FireAt: fire},
	}
	for _, ref := range dead {
		_, ok, err := s.Fail(bg, ref, execstore.Failure{Error: "card declined", At: failAt, Dead: true})
		require.NoError(t, err)
		require.True(t, ok)
	}
	pending := execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: seqs[1]}
	return s, db.Collection("executions"), dead, pending
}

// Apply revives dead items once: a second Apply, and an Apply to a pending item, find them
// not dead; each outcome is logged with who asked.
func TestApplyReviveOnce(t *testing.T) {
	s, coll, dead, pending := deadFixture(t)
	var logs logtest.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	who := Requester{User: "ops", From: "10.0.0.9"}

	r := Apply(bg, coll, Revive, append(dead, pending), who, log)
	assert.Equal(t, map[string]int{"done": 2, "not dead": 1}, r.Counts)
	assert.Equal(t, []Outcome{Done, Done, NotDead}, outcomes(r))
	out, err := s.PendingOutbox(bg, 0)
	require.NoError(t, err)
	assert.Len(t, out, 2, "the revived entry is pending again")
	due, err := s.DueTimers(bg, fire, 0)
	require.NoError(t, err)
	assert.Len(t, due, 1, "the revived timer is armed again")

	again := Apply(bg, coll, Revive, dead, who, log)
	assert.Equal(t, []Outcome{NotDead, NotDead}, outcomes(again))
	text := logs.String()
	assert.Contains(t, text, `msg="dead item revive" user=ops action=revive item="outbox pay-1/`)
	assert.Contains(t, text, `outcome=done from=10.0.0.9`)
	assert.Contains(t, text, `item="timer pay-1 \"remind\" at 2030-01-01T00:00:00Z" outcome="not dead"`)
}

// Apply discards dead items for good; a revive after finds nothing.
func TestApplyDiscard(t *testing.T) {
	s, coll, dead, _ := deadFixture(t)
	r := Apply(bg, coll, Discard, dead, Requester{User: "ops"}, slog.New(slog.DiscardHandler))
	assert.Equal(t, []Outcome{Done, Done}, outcomes(r))
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
	r = Apply(bg, coll, Revive, dead, Requester{User: "ops"}, slog.New(slog.DiscardHandler))
	assert.Equal(t, []Outcome{NotDead, NotDead}, outcomes(r))
}

// Two operators acting on the same items at once: each item is done by exactly one of them.
func TestApplyConcurrentOnce(t *testing.T) {
	_, coll, dead, _ := deadFixture(t)
	for _, action := range []Action{Revive, Discard} {
		results := make([]Result, 4)
		var wg sync.WaitGroup
		for i := range results {
			wg.Go(func() {
				a := action
				if i%2 == 1 {
					a = map[Action]Action{Revive: Discard, Discard: Revive}[action]
				}
				results[i] = Apply(bg, coll, a, dead, Requester{User: "ops"}, slog.New(slog.DiscardHandler))
			})
		}
		wg.Wait()
		for item := range dead {
			done := 0
			for _, r := range results {
				assert.Contains(t, []Outcome{Done, NotDead}, r.Items[item].Outcome, r.Items[item].Error)
				if r.Items[item].Outcome == Done {
					done++
				}
			}
			assert.Equal(t, 1, done, "item %d done once", item)
		}
		// Make the items dead again for the next round, as a relay would.
		_, coll2, dead2, _ := deadFixture(t)
		coll, dead = coll2, dead2
	}
}

// An ended context writes nothing.
func TestApplyEndedContext(t *testing.T) {
	s, coll, dead, _ := deadFixture(t)
	ctx, cancel := context.WithCancel(bg)
	cancel()
	r := Apply(ctx, coll, Revive, dead, Requester{User: "ops"}, slog.New(slog.DiscardHandler))
	assert.Equal(t, []Outcome{NotTried, NotTried}, outcomes(r))
	page, err := s.ListDead(bg, execstore.DeadQuery{})
	require.NoError(t, err)
	assert.Len(t, page.Items, 2)
}

func outcomes(r Result) []Outcome {
	var out []Outcome
	for _, it := range r.Items {
		out = append(out, it.Outcome)
	}
	return out
}

// ParseRef reads back what ItemRef's String writes, and refuses what is no item's name.
func TestParseRef(t *testing.T) {
	for _, ref := range []execstore.ItemRef{
		{Kind: execstore.OutboxItem, ExecutionID: "pay-t3", Seq: 7},
		{Kind: execstore.SpawnItem, ExecutionID: "a/b/c", Seq: 0},
		{Kind: execstore.TimerItem, ExecutionID: "pay-t3", Path: "reminder", FireAt: fire},
		{Kind: execstore.TimerItem, ExecutionID: `x "y" at z`, Path: `p "q" at 2030-01-01T00:00:00Z`, FireAt: fire.Add(1500 * time.Millisecond)},
		{Kind: execstore.TimerItem, ExecutionID: "e", Path: "a/b", FireAt: time.Date(2031, 5, 6, 7, 8, 9, 123456789, time.UTC)},
	} {
		got, err := ParseRef(ref.String())
		require.NoError(t, err, ref.String())
		assert.Equal(t, ref.String(), got.String())
		assert.True(t, ref.FireAt.Equal(got.FireAt))
		assert.Equal(t, ref.ExecutionID, got.ExecutionID)
		assert.Equal(t, ref.Path, got.Path)
	}
	for _, bad := range []string{"", "outbox", "outbox pay", "outbox pay/x", "outbox pay/-1", "bogus pay/1", "outbox /1",
		`timer pay "p"`, `timer pay p at 2030-01-01T00:00:00Z`, `timer pay "p" at tomorrow`} {
		_, err := ParseRef(bad)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%q", bad)
	}
}
