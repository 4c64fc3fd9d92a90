package ui

import (
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/leases"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/journal"
	"github.com/execstore/execstore/server"
)

// srv is the server the tests read: the embedded FerretDB behind its front in a child
// process, or MONGODB_URI when set.
var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

// fill writes, through aio, idem and journal, into database db a shop with work of every
// kind, relative to now:
//
//   - order-1 (checkout, running, a root): commits with pending outbox entries to ship-1 and
//     audit, a dead entry, a timer due 10 minutes ago and one in 2 hours, a spawn intent of
//     ship-1, four trace steps and its dedupe set;
//   - ship-1 (shipping, running, child of order-1) with a timer in 30 minutes, and ship-2
//     (done, child of order-1);
//   - order-2 (checkout, done), order-3 (checkout, failed), order-4 (suspended) and
//     order-5 (cancelled); order-old (done) deleted for retention;
//   - a dead timer of order-3;
//   - idempotency records req-claimed and req-done (completed with headers and a body);
//   - the relays' leases: member relay-eu-1 dividing 4 partitions, holding 0 to 2; the
//     sweepers': member sweeper-eu-1 holding all 4;
//   - the journal invocation pay-1;
//   - the rate samples of the last 45 minutes of relay-eu-1 and sweeper-eu-1.
func fill(t testing.TB, uri, db string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := server.Connection{Database: db}
	now := time.Now().UTC()

	store, err := aio.Open(ctx, uri, aio.Options{Connection: conn, Partitions: 4})
	require.NoError(t, err)
	defer func() { require.NoError(t, store.Close(ctx)) }()
	save := func(e *execstore.Execution) { require.NoError(t, store.Save(ctx, e)) }
	// The rate samples of the last hour: a relay and a sweeper (relay-eu-1, sweeper-eu-1)
	// that handled a wave of work, with a burst of failures, a dead item and a backlog.
	var relayTotal, sweeperTotal execstore.RateTotals
	for i := 44; i >= 0; i-- {
		at := now.Add(-time.Duration(i) * time.Minute)
		load := int64(20 + (i*37)%60)
		r := execstore.RateRecord{Component: "relay", Member: "relay-eu-1", At: at, From: relayTotal}
		relayTotal.Delivered += load
		if i >= 10 && i < 14 {
			relayTotal.Failed += int64(5 * (i - 9))
			r.BacklogAge = time.Duration(i) * time.Second
		}
		if i == 12 {
			relayTotal.Dead++
		}
		r.To = relayTotal
		require.NoError(t, store.RecordRates(ctx, r))
		sw := execstore.RateRecord{Component: "sweeper", Member: "sweeper-eu-1", At: at, From: sweeperTotal,
			BacklogAge: time.Duration(load%7) * 100 * time.Millisecond}
		sweeperTotal.Delivered += load / 4
		sw.To = sweeperTotal
		require.NoError(t, store.RecordRates(ctx, sw))
	}
	commit := func(id, event string, data string, c execstore.Commit) {
		exe, processed, err := store.LoadForEvent(ctx, id, event)
		require.NoError(t, err)
		require.False(t, processed)
		exe.Data = []byte(data)
		c.ProcessedEventID = event
		_, err = store.Commit(ctx, exe, c)
		require.NoError(t, err)
	}

	save(&execstore.Execution{ID: "order-1", DefinitionID: "checkout", Status: execstore.Running, Data: []byte(`{"state":"cart"}`)})
	commit("order-1", "evt-1", `{"state":"paid","total":42,"card":"4242-secret"}`, execstore.Commit{
		Emits: []execstore.Emit{
			{TargetID: "ship-1", Event: []byte(`{"id":"evt-2","type":"ship","address":"1 Main St"}`)},
			{TargetID: "audit", Event: []byte(`{"id":"evt-3","type":"paid","amount":42}`)},
		},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("Paid.Reminder", now.Add(-10*time.Minute).Truncate(time.Second)),
			execstore.ScheduleTimer("Paid.Expiry", now.Add(2*time.Hour).Truncate(time.Second))},
		Spawns: []execstore.Spawn{{ChildID: "ship-1", RootPath: "Fork.Ship", Context: map[string]any{"warehouse": "w-3"}}},
		Trace:  map[string]any{"from": "cart", "to": "paid", "event": "evt-1"},
	})
	commit("order-1", "evt-4", `{"state":"packing","total":42}`, execstore.Commit{
		Emits: []execstore.Emit{{TargetID: "billing", Event: []byte(`{"id":"evt-5","type":"invoice"}`)}},
		Trace: map[string]any{"from": "paid", "to": "packing", "event": "evt-4"},
	})
	commit("order-1", "evt-6", `{"state":"packed","total":42}`, execstore.Commit{
		Trace: map[string]any{"from": "packing", "to": "packed", "event": "evt-6"},
	})
	commit("order-1", "evt-7", `{"state":"awaiting-shipment","total":42,"card":"4242-secret"}`, execstore.Commit{
		Trace: map[string]any{"from": "packed", "to": "awaiting-shipment", "event": "evt-7"},
	})
	save(&execstore.Execution{ID: "ship-1", DefinitionID: "shipping", Status: execstore.Running, ParentID: "order-1",
		Data: []byte("label printed")})
	commit("ship-1", "evt-2", `{"state":"awaiting-pickup"}`, execstore.Commit{
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("Pickup.Deadline", now.Add(30*time.Minute).Truncate(time.Second))},
		Trace:  map[string]any{"from": "new", "to": "awaiting-pickup"},
	})
	save(&execstore.Execution{ID: "ship-2", DefinitionID: "shipping", Status: execstore.Done, ParentID: "order-1", Data: []byte(`{}`)})
	save(&execstore.Execution{ID: "order-2", DefinitionID: "checkout", Status: execstore.Done, Data: []byte(`{"state":"delivered"}`)})
	save(&execstore.Execution{ID: "order-3", DefinitionID: "checkout", Status: execstore.Running, Data: []byte(`{"state":"paid"}`)})
	commit("order-3", "evt-8", `{"state":"failed"}`, execstore.Commit{
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("Retry.Charge", now.Add(-time.Hour).Truncate(time.Second))},
	})
	save(&execstore.Execution{ID: "order-4", DefinitionID: "checkout", Status: execstore.Suspended, Data: []byte(`{"state":"on-hold"}`)})
	save(&execstore.Execution{ID: "order-5", DefinitionID: "checkout", Status: execstore.Cancelled, Data: []byte(`{"state":"cancelled"}`)})
	save(&execstore.Execution{ID: "order-old", DefinitionID: "checkout", Status: execstore.Done, Data: []byte(`{}`)})

	// Dead work: order-1's entry to audit, and order-3's due timer, as a relay leaves them.
	pending, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	for _, p := range pending {
		if p.TargetID == "audit" {
			_, ok, err := store.Fail(ctx, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: p.SourceID, Seq: p.Seq},
				execstore.Failure{Error: "audit service: 503 Service Unavailable", At: now.Add(-5 * time.Minute), Dead: true})
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	due, err := store.DueTimers(ctx, now, 0)
	require.NoError(t, err)
	for _, d := range due {
		if d.ExecutionID == "order-3" {
			_, ok, err := store.Fail(ctx, execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: d.ExecutionID, Path: d.Path, FireAt: d.FireAt},
				execstore.Failure{Error: "payment gateway: card declined", At: now.Add(-30 * time.Minute), Dead: true})
			require.NoError(t, err)
			require.True(t, ok)
		}
	}
	// Finished work retention deleted: order-old.
	cutoffs := map[execstore.Status]time.Time{execstore.Done: now.Add(time.Minute)}
	expired, err := store.ExpiredIn(ctx, []int{0, 1, 2, 3}, cutoffs, 100)
	require.NoError(t, err)
	var old []execstore.FinishedExecution
	for _, e := range expired {
		if e.ID == "order-old" {
			old = append(old, e)
		}
	}
	require.Len(t, old, 1)
	_, err = store.DeleteExpired(ctx, old, cutoffs)
	require.NoError(t, err)

	idems, err := idem.Open(ctx, uri, idem.Options{Connection: conn, ReapInterval: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, idems.Close(ctx)) }()
	_, err = idems.Claim(ctx, "req-claimed", "fp-claimed", 1, time.Hour)
	require.NoError(t, err)
	c, err := idems.Claim(ctx, "req-done", "fp-done", 2, time.Hour)
	require.NoError(t, err)
	ok, err := idems.Complete(ctx, "req-done", c.Token, idem.Response{Status: http.StatusCreated,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Session": {"hdr-secret-value"}},
		Body:   []byte(`{"order":"order-1","ok":true}`)}, 24*time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	_, err = idems.Claim(ctx, leases.MemberKey(leases.RelayKey, "relay-eu-1"), leases.MemberFingerprint(4), 1, time.Hour)
	require.NoError(t, err)
	for p := range 3 {
		_, err = idems.ClaimAs(ctx, leases.PartitionKey(leases.RelayKey, p), leases.Fingerprint, 1, time.Hour, "relay-eu-1")
		require.NoError(t, err)
	}
	_, err = idems.Claim(ctx, leases.MemberKey(leases.SweeperKey, "sweeper-eu-1"), leases.MemberFingerprint(4), 1, time.Hour)
	require.NoError(t, err)
	for p := range 4 {
		_, err = idems.ClaimAs(ctx, leases.PartitionKey(leases.SweeperKey, p), leases.Fingerprint, 1, time.Hour, "sweeper-eu-1")
		require.NoError(t, err)
	}

	ring, err := journal.NewKeyRing(journal.NewKey("k1"))
	require.NoError(t, err)
	j, err := journal.Open(ctx, uri, ring, journal.Options{AcceptWeakDurability: true, Connection: conn})
	require.NoError(t, err)
	defer func() { require.NoError(t, j.Close(ctx)) }()
	// pay-0 ran to its end and the retention deleted it: the journal's totals count one.
	{
		f0, err := j.Claim(ctx, journal.Identity{ID: "pay-0", Scope: "shop/payments", Digest: "sha256:0a1b"}, "worker-a")
		require.NoError(t, err)
		f0, c0, err := j.Checkpoint(ctx, f0, journal.PhaseBefore, []byte("pay-0 state"))
		require.NoError(t, err)
		f0, err = j.Prepare(ctx, f0, c0, []byte("pay-0 operation"))
		require.NoError(t, err)
		a0, err := j.Dispatch(ctx, f0)
		require.NoError(t, err)
		_, err = j.Reconcile(ctx, a0.Fence, journal.Receipt{Attempt: a0.N, Outcome: journal.Succeeded})
		require.NoError(t, err)
		n, err := j.DeleteExpired(ctx, time.Now().Add(time.Hour), 10)
		require.NoError(t, err)
		require.EqualValues(t, 1, n)
	}
	fence, err := j.Claim(ctx, journal.Identity{ID: "pay-1", Scope: "shop/payments", Digest: "sha256:4f2a"}, "worker-a")
	require.NoError(t, err)
	fence, ckpt, err := j.Checkpoint(ctx, fence, journal.PhaseBefore, []byte("PLAINTEXT-CHECKPOINT"))
	require.NoError(t, err)
	fence, err = j.Prepare(ctx, fence, ckpt, []byte("PLAINTEXT-OPERATION"))
	require.NoError(t, err)
	attempt, err := j.Dispatch(ctx, fence)
	require.NoError(t, err)
	_, err = j.Reconcile(ctx, attempt.Fence, journal.Receipt{Attempt: attempt.N, Outcome: journal.Succeeded, Data: []byte("PLAINTEXT-RECEIPT")})
	require.NoError(t, err)
}

// secrets are what fill stores that no page may show without ?body=1, or ever.
var (
	bodies     = []string{"4242-secret", "1 Main St", `"ok":true`}
	neverShown = []string{"hdr-secret-value", "PLAINTEXT-CHECKPOINT", "PLAINTEXT-OPERATION", "PLAINTEXT-RECEIPT"}
)
