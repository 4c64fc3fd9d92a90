package aio_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/internal/unique"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// What hands out something unique has exactly one winner, and no command is an upsert whose
// filter is the _id alone: first opsrun.Reserve, which takes the store's seq blocks, on its own
// (its server tests are here, as the tests of package ops run without a server); then a whole
// engine's worth of the store's calls.

// upsertWatch records every command a client sends, and the upserts among them whose filter
// is the _id alone (unique.IDOnlyUpserts): none may be sent, on any path.
type upsertWatch struct {
	mu     sync.Mutex
	names  []string
	idOnly []string
	// before, when set, runs in the sending goroutine before each command goes out: an
	// injected writer.
	before func(name string, cmd bson.Raw)
}

func (w *upsertWatch) monitor() *mongoevent.CommandMonitor {
	return &mongoevent.CommandMonitor{Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
		w.mu.Lock()
		w.names = append(w.names, e.CommandName)
		for _, f := range unique.IDOnlyUpserts(e.Command) {
			w.idOnly = append(w.idOnly, e.CommandName+" "+f.String())
		}
		before := w.before
		w.mu.Unlock()
		if before != nil {
			before(e.CommandName, e.Command)
		}
	}}
}

func (w *upsertWatch) commands() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.names...)
}

func (w *upsertWatch) assertNoIDOnlyUpsert(t *testing.T) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	if n := len(w.idOnly); n > 0 {
		t.Errorf("%d upserts whose filter is the _id alone (several winners on a row-locking engine), the first: %s",
			n, w.idOnly[0])
	}
}

// dropDatabase drops db, reached through a client of its own.
func dropDatabase(t *testing.T, db string) {
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI))
	require.NoError(t, err)
	defer client.Disconnect(bg)
	assert.NoError(t, client.Database(db).Drop(bg))
}

// countersEnv is an opsrun.Env over the counters collection of db, reached through client.
func countersEnv(client *mongo.Client, db string) opsrun.Env {
	return opsrun.Env{Counters: client.Database(db).Collection(ops.CountersCollection)}
}

func watchedClient(t *testing.T, w *upsertWatch) *mongo.Client {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI).SetMonitor(w.monitor()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(bg) })
	return client
}

// Many reservers of one counter that does not exist yet get disjoint blocks, and the counter
// ends at the sum: the counter is created by an insert, reserved by an update of the existing
// document, and no command is an _id-only upsert.
func TestCounterReservationsAreDisjoint(t *testing.T) {
	w := &upsertWatch{}
	client := watchedClient(t, w)
	db := testDatabase(t)
	t.Cleanup(func() { _ = client.Database(db).Drop(bg) })
	env := countersEnv(client, db)

	const racers, rounds, block = 16, 8, 10
	var mu sync.Mutex
	var lasts []int64
	var g errgroup.Group
	for range racers {
		g.Go(func() error {
			for range rounds {
				last, err := opsrun.Reserve(bg, env, ops.OutboxCounter, block)
				if err != nil {
					return err
				}
				mu.Lock()
				lasts = append(lasts, last)
				mu.Unlock()
			}
			return nil
		})
	}
	require.NoError(t, g.Wait())
	sort.Slice(lasts, func(i, j int) bool { return lasts[i] < lasts[j] })
	for i, last := range lasts {
		assert.Equal(t, int64(block*(i+1)), last, "block %d", i)
	}
	w.assertNoIDOnlyUpsert(t)
	assert.Contains(t, w.commands(), "insert", "the counter is created by an insert")
}

// Another process creates the counter and reserves a block between this reservation's miss
// and its insert: the insert is refused as a duplicate, and the reservation runs again on the
// document that now exists, so the two blocks are disjoint.
func TestCounterCreationRaceInjected(t *testing.T) {
	w := &upsertWatch{}
	client := watchedClient(t, w)
	other, err := mongo.Connect(options.Client().ApplyURI(srv.URI))
	require.NoError(t, err)
	defer other.Disconnect(bg)
	db := testDatabase(t)
	t.Cleanup(func() { _ = client.Database(db).Drop(bg) })

	var otherLast int64
	var once sync.Once
	w.before = func(name string, cmd bson.Raw) {
		if name != "insert" || cmd.Lookup("insert").StringValue() != ops.CountersCollection {
			return
		}
		once.Do(func() {
			otherLast, err = opsrun.Reserve(bg, countersEnv(other, db), ops.SpawnCounter, 5)
		})
	}
	last, rerr := opsrun.Reserve(bg, countersEnv(client, db), ops.SpawnCounter, 7)
	require.NoError(t, rerr)
	require.NoError(t, err)
	assert.Equal(t, int64(5), otherLast, "the injected writer created the counter and took (0, 5]")
	assert.Equal(t, int64(12), last, "this reservation took (5, 12] after its insert was refused")
	assert.Equal(t, []string{"findAndModify", "insert", "findAndModify"}, w.commands())
	w.assertNoIDOnlyUpsert(t)
}

// A whole engine's worth of calls on aio — creates, commits with emits, spawns and timers,
// the relay's acks, the sweep — sends no _id-only upsert.
func TestStoreSendsNoIDOnlyUpsert(t *testing.T) {
	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			w := &upsertWatch{}
			db := testDatabase(t)
			store, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: db, ClientOptions: options.Client().SetMonitor(w.monitor())}, DisableGroupCommit: !grouped})
			require.NoError(t, err)
			defer func() { _ = store.Close(bg) }()
			t.Cleanup(func() { dropDatabase(t, db) })
			var g errgroup.Group
			for i := range 8 {
				g.Go(func() error {
					id := fmt.Sprintf("x%d", i)
					exe := &execstore.Execution{ID: id, DefinitionID: "d", Status: execstore.Running, Data: []byte("{}")}
					if err := store.Save(bg, exe); err != nil {
						return err
					}
					_, err := store.Commit(bg, exe, execstore.Commit{
						Emits:            []execstore.Emit{{TargetID: "y", Event: []byte("e")}},
						Spawns:           []execstore.Spawn{{ChildID: id + "-child", RootPath: "A"}},
						Timers:           []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(1))},
						ProcessedEventID: "ev",
					})
					return err
				})
			}
			require.NoError(t, g.Wait())
			pending, err := store.PendingOutbox(bg, 100)
			require.NoError(t, err)
			require.Len(t, pending, 8)
			for _, p := range pending {
				require.NoError(t, store.AckOutbox(bg, p.SourceID, p.Seq))
			}
			spawns, err := store.PendingSpawns(bg, 100)
			require.NoError(t, err)
			require.Len(t, spawns, 8)
			for _, p := range spawns {
				require.NoError(t, store.AckSpawn(bg, p.ParentID, p.Seq))
			}
			due, err := store.DueTimers(bg, unixAt(2), 100)
			require.NoError(t, err)
			require.Len(t, due, 8)
			_, err = store.DeleteTimer(bg, due[0].ExecutionID, due[0].Path, due[0].FireAt)
			require.NoError(t, err)
			require.NoError(t, store.DeleteTimers(bg, due[1:]))
			w.assertNoIDOnlyUpsert(t)
		})
	}
}

// A store opened on a client with a strict Stable API (version 1) identifies its server and
// runs an event's whole round: every command it sends is in the API (MongoDB refuses the rest
// under strict; buildInfo is refused and detection falls back to hello).
func TestStrictStableAPI(t *testing.T) {
	db := testDatabase(t)
	store, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: db, ClientOptions: options.Client().SetServerAPIOptions(options.ServerAPI(options.ServerAPIVersion1).SetStrict(true))}})
	require.NoError(t, err)
	defer func() { _ = store.Close(bg) }()
	t.Cleanup(func() { dropDatabase(t, db) })
	assert.NotEqual(t, server.FamilyUnknown, store.Server().Family, "%+v", store.Server())

	exe := &execstore.Execution{ID: "s", DefinitionID: "d", Status: execstore.Running, Data: []byte("{}")}
	require.NoError(t, store.Save(bg, exe))
	got, processed, err := store.LoadForEvent(bg, "s", "e1")
	require.NoError(t, err)
	require.False(t, processed)
	_, err = store.Commit(bg, got, execstore.Commit{ProcessedEventID: "e1",
		Emits:  []execstore.Emit{{TargetID: "t", Event: []byte("e2")}},
		Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", unixAt(1))}})
	require.NoError(t, err)
	_, processed, err = store.LoadForEvent(bg, "s", "e1")
	require.NoError(t, err)
	assert.True(t, processed)
	pending, err := store.PendingOutbox(bg, 10)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	require.NoError(t, store.AckOutbox(bg, "s", pending[0].Seq))
	due, err := store.DueTimers(bg, unixAt(2), 10)
	require.NoError(t, err)
	require.Len(t, due, 1)
	require.NoError(t, store.DeleteTimers(bg, due))
}
