package main

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/server"
)

// TestBacklog checks `backlog` on work the stores left: pending entries and a spawn intent
// with their commit times, a long due timer and two later ones, a dead entry, and a finished
// execution retention deleted. It sends the one aggregation (or, on a server without its
// operators, the find standing in for it) and one find of the counters.
func TestBacklog(t *testing.T) {
	empty := populateNothing(t)
	require.Equal(t, "backlog: nothing waiting (now 2030-03-17T17:30:00Z)\n\nretention: deleted 0 CANCELLED, 0 DONE, 0 FAILED; last never\n",
		empty.inspect(t, "backlog"))

	f := populate(t)
	ctx := context.Background()
	store, err := aio.Open(ctx, srv.URI, aio.Options{Connection: server.Connection{Database: f.db}})
	require.NoError(t, err)
	defer store.Close(ctx)
	p, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	require.Len(t, p, 3)
	_, ok, err := store.Fail(ctx, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: p[0].SourceID, Seq: p[0].Seq},
		execstore.Failure{Error: "cannot ship", At: time.Now(), Dead: true})
	require.NoError(t, err)
	require.True(t, ok)
	cutoffs := map[execstore.Status]time.Time{execstore.Done: time.Now().Add(time.Hour)}
	var all []int
	for p := range store.Partitions() {
		all = append(all, p)
	}
	expired, err := store.ExpiredIn(ctx, all, cutoffs, 10)
	require.NoError(t, err)
	require.Len(t, expired, 1)
	require.Equal(t, "order-2", expired[0].ID)
	deleted, err := store.DeleteExpired(ctx, expired, cutoffs)
	require.NoError(t, err)
	require.EqualValues(t, 1, deleted[execstore.Done])

	var mu sync.Mutex
	sent := map[string]int{}
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		defer mu.Unlock()
		sent[e.CommandName]++
	}}
	r := runWith(t, "", options.Client().SetMonitor(monitor), "-uri", srv.URI, "-db", f.db, "backlog", "-json")
	require.Equal(t, 0, r.code, r.stderr)
	var b inspect.Backlog
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &b))
	require.Len(t, b.Partitions, 1)
	require.Equal(t, b.Total, b.Partitions[0].BacklogFigures)
	tot := b.Total
	require.EqualValues(t, 2, tot.PendingOutbox, "the dead entry is not pending")
	require.EqualValues(t, 1, tot.PendingSpawns)
	require.EqualValues(t, 1, tot.Dead)
	require.EqualValues(t, 1, tot.DueTimers, "Cart.Expiry is due at the tests' now; the others are not")
	require.Equal(t, "2023-11-14T22:13:20Z", tot.OldestDueAt)
	require.InDelta(t, testNow.Sub(fireDue).Seconds(), tot.TimerLagSeconds, 0.001)
	require.NotEmpty(t, tot.OldestPendingAt, "entries record their commit time")
	at, err := time.Parse(time.RFC3339Nano, tot.OldestPendingAt)
	require.NoError(t, err)
	require.InDelta(t, testNow.Sub(at).Seconds(), tot.PendingAgeSeconds, 0.001)
	require.Equal(t, map[string]int64{"DONE": 1, "FAILED": 0, "CANCELLED": 0}, b.Retention.Deleted)
	require.NotEmpty(t, b.Retention.LastAt)

	mu.Lock()
	// The aggregation, or where the server refuses its operators the find standing in; then
	// the counters' find.
	require.Equal(t, 1, sent["aggregate"], "%v", sent)
	require.Contains(t, []int{1, 2}, sent["find"], "%v", sent)
	mu.Unlock()

	text := f.inspect(t, "backlog")
	require.Contains(t, text, "backlog: 1 partition with work waiting (now 2030-03-17T17:30:00Z)\n")
	require.Regexp(t, `\n  \d+ +2 +1 +\d+d(\d+h)? +1 +2314d19h +1\n  total +2 +1 +\d+d(\d+h)? +1 +2314d19h +1\n`, text)
	require.Regexp(t, `\nretention: deleted 0 CANCELLED, 1 DONE, 0 FAILED; last \S+ \(\S+ ago\)\n`, text)
}
