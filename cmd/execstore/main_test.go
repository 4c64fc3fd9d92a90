package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/journal"
	"github.com/execstore/execstore/server"
)

// srv is the server the tests read: the embedded FerretDB behind its front in a child
// process, or MONGODB_URI when set.
var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

// testNow is the tests' now: 2030-03-17T17:30:00Z, 1000 s before the timer Paid.Reminder.
var testNow = time.Unix(1_899_999_000, 0).UTC()

// The fire times the fixture schedules.
var (
	fireReminder = time.Date(2030, time.March, 17, 17, 46, 40, 0, time.UTC)    // in 16m40s
	fireDeadline = time.Date(2030, time.March, 17, 18, 46, 40, 0, time.UTC)    // in 1h16m
	fireDue      = time.Date(2023, time.November, 14, 22, 13, 20, 0, time.UTC) // long due
)

// The plaintexts the fixture seals in the journal: never to be printed.
var sealedPlaintexts = []string{"PLAINTEXT-CHECKPOINT-cart-c7", "PLAINTEXT-OPERATION-charge-42", "PLAINTEXT-RECEIPT-ch_91"}

// fixture is a database populated through the real stores.
type fixture struct {
	db           string
	checkpointID string // the journal checkpoint's id, chosen at random when written
}

// populate writes, through aio, idem and journal, into a database of t's own:
//
//   - order-1 (checkout, running, a root): two commits with emits (JSON, text and binary
//     events, one without a target), timers (one long due), a spawn, two trace steps and
//     two processed events;
//   - order-2 (checkout, done, a root), with a binary snapshot;
//   - ship-1 (shipping, running, child of order-1), with a text snapshot and a timer;
//   - the idempotency records req-claimed (live lease), req-lapsed (lease over) and
//     req-done (completed, with headers and a body);
//   - the journal invocation pay-1: claimed, checkpointed, prepared, dispatched, reconciled
//     unknown then succeeded.
func populate(t *testing.T) fixture {
	t.Helper()
	return populateAt(t, srv.URI, testDatabase(t))
}

// testDatabase returns a database name of its own for t.
func testDatabase(t testing.TB) string { return testserver.Database(t, "cli") }

// populateAt is populate on the server at uri, in database db.
func populateAt(t *testing.T, uri, db string) fixture {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f := fixture{db: db}
	conn := server.Connection{Database: f.db}

	store, err := aio.Open(ctx, uri, aio.Options{Connection: conn})
	require.NoError(t, err)
	defer func() { require.NoError(t, store.Close(ctx)) }()
	order := &execstore.Execution{ID: "order-1", DefinitionID: "checkout", Status: execstore.Running,
		Data: []byte(`{"state":"cart"}`)}
	require.NoError(t, store.Save(ctx, order))
	exe, processed, err := store.LoadForEvent(ctx, "order-1", "evt-1")
	require.NoError(t, err)
	require.False(t, processed)
	exe.Data = []byte(`{"state": "paid", "total": 42}`)
	_, err = store.Commit(ctx, exe, execstore.Commit{
		Emits: []execstore.Emit{
			{TargetID: "ship-1", Event: []byte(`{"id":"evt-2","type":"ship"}`)},
			{Event: []byte("a plain text notification that is rather longer than any preview")},
		},
		ProcessedEventID: "evt-1",
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("Paid.Reminder", fireReminder), execstore.ScheduleTimer("Cart.Expiry", fireDue)},
		Spawns:           []execstore.Spawn{{ChildID: "ship-1", RootPath: "Fork.A", Context: map[string]any{"warehouse": "w-3", "items": 2}}},
		Trace:            map[string]any{"from": "cart", "to": "paid", "event": "evt-1"},
	})
	require.NoError(t, err)
	exe, _, err = store.LoadForEvent(ctx, "order-1", "evt-2")
	require.NoError(t, err)
	exe.Data = []byte(`{"state":"packed"}`)
	_, err = store.Commit(ctx, exe, execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "audit", Event: []byte{0x00, 0x01, 0xfe, 0xff}}},
		ProcessedEventID: "evt-2",
		Trace:            map[string]any{"from": "paid", "to": "packed"},
	})
	require.NoError(t, err)
	require.NoError(t, store.Save(ctx, &execstore.Execution{ID: "order-2", DefinitionID: "checkout",
		Status: execstore.Done, Data: []byte{0xff, 0xfe, 0x00, 0x10}}))
	ship := &execstore.Execution{ID: "ship-1", DefinitionID: "shipping", Status: execstore.Running,
		ParentID: "order-1", Data: []byte("label printed\nawaiting pickup")}
	require.NoError(t, store.Save(ctx, ship))
	_, err = store.Commit(ctx, ship, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("Ship.Deadline", fireDeadline)}})
	require.NoError(t, err)

	idems, err := idem.Open(ctx, uri, idem.Options{Connection: conn, ReapInterval: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, idems.Close(ctx)) }()
	_, err = idems.Claim(ctx, "req-claimed", "fp-claimed", 1, time.Hour)
	require.NoError(t, err)
	_, err = idems.Claim(ctx, "req-lapsed", "fp-lapsed", 1, time.Millisecond)
	require.NoError(t, err)
	c, err := idems.Claim(ctx, "req-done", "fp-done", 2, time.Hour)
	require.NoError(t, err)
	ok, err := idems.Complete(ctx, "req-done", c.Token, idem.Response{Status: http.StatusCreated,
		Header: http.Header{"Content-Type": {"application/json"}, "X-Session": {"hdr-secret-value"}},
		Body:   []byte(`{"order":"order-1","ok":true}`)}, 24*time.Hour)
	require.NoError(t, err)
	require.True(t, ok)

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
	fence, f.checkpointID, err = j.Checkpoint(ctx, fence, journal.PhaseBefore, []byte(sealedPlaintexts[0]))
	require.NoError(t, err)
	fence, err = j.Prepare(ctx, fence, f.checkpointID, []byte(sealedPlaintexts[1]))
	require.NoError(t, err)
	attempt, err := j.Dispatch(ctx, fence)
	require.NoError(t, err)
	fence, err = j.Reconcile(ctx, attempt.Fence, journal.Receipt{Attempt: attempt.N, Outcome: journal.Unknown})
	require.NoError(t, err)
	_, err = j.Reconcile(ctx, fence, journal.Receipt{Attempt: attempt.N, Outcome: journal.Succeeded, Data: []byte(sealedPlaintexts[2])})
	require.NoError(t, err)

	// req-lapsed's lease of 1ms is over once idem judges it so, by the server's clock: its
	// end includes the writer's clock error bound.
	for {
		rec, err := idems.Get(ctx, "req-lapsed")
		require.NoError(t, err)
		if rec.Lapsed {
			return f
		}
		time.Sleep(time.Millisecond)
	}
}

// result is what one run of the command printed and returned.
type result struct {
	stdout, stderr string
	code           int
}

// runWith runs the command with args, the tests' now, no environment variable but
// MONGODB_URI set to envURI unless that is "", and copts (nil for none).
func runWith(t *testing.T, envURI string, copts *options.ClientOptions, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, environment{
		stdout: &stdout, stderr: &stderr,
		getenv: func(name string) string {
			if name == "MONGODB_URI" {
				return envURI
			}
			return ""
		},
		now:           func() time.Time { return testNow },
		clientOptions: copts,
	})
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// cli runs the command with args and no server named by the environment.
func cli(t *testing.T, args ...string) result {
	t.Helper()
	return runWith(t, "", nil, args...)
}

// inspect runs the command on f's database and requires it to succeed.
func (f fixture) inspect(t *testing.T, args ...string) string {
	t.Helper()
	r := cli(t, append([]string{"-uri", srv.URI, "-db", f.db}, args...)...)
	require.Equal(t, 0, r.code, "stderr: %s", r.stderr)
	require.Empty(t, r.stderr)
	return r.stdout
}
