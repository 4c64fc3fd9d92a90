package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/server"
)

// The server stops and starts again on the same data directory and address while writers
// commit: calls in flight fail cleanly (an unknown outcome, never a wrong answer), the store
// recovers by itself without being reopened, and nothing reported committed is lost.
func TestStoreSurvivesServerRestart(t *testing.T) {
	srv.RequireEmbedded(t, "the test stops and restarts an embedded server of its own; "+
		"the server MONGODB_URI names cannot be restarted by a test")
	ctx := context.Background()
	dir := t.TempDir()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	first, err := embedded.Start(ctx, embedded.Options{Dir: dir, Addr: addr})
	require.NoError(t, err)
	store, err := aio.Open(ctx, first.URI()+"?heartbeatFrequencyMS=500&serverSelectionTimeoutMS=1000",
		aio.Options{Connection: server.Connection{Database: "restart"}})
	require.NoError(t, err)
	defer store.Close(ctx)

	const writers = 4
	type committed struct {
		id      string
		version int64
		event   string
	}
	var (
		mu       sync.Mutex
		acked    []committed
		unknown  int
		failures []error
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			id := fmt.Sprintf("w%d", w)
			e := &execstore.Execution{ID: id, DefinitionID: "d", Status: execstore.Running}
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				ev := fmt.Sprintf("%s-%d", id, i)
				_, err := store.Commit(cctx, e, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte(ev)}}})
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					acked = append(acked, committed{id, e.Version, ev})
				case errors.Is(err, execstore.ErrOutcomeUnknown), errors.Is(err, execstore.ErrConflict):
					unknown++
				default:
					failures = append(failures, err)
				}
				mu.Unlock()
				if err != nil {
					// Reload before anything else, as an unknown outcome demands.
					for {
						lctx, cancel := context.WithTimeout(ctx, time.Second)
						got, lerr := store.Load(lctx, id)
						cancel()
						if lerr == nil {
							if got != nil {
								e = got
							}
							break
						}
						select {
						case <-stop:
							return
						case <-time.After(50 * time.Millisecond):
						}
					}
				}
			}
		})
	}

	time.Sleep(700 * time.Millisecond)
	require.NoError(t, first.Close()) // the server goes away mid-run
	time.Sleep(500 * time.Millisecond)
	second, err := embedded.Start(ctx, embedded.Options{Dir: dir, Addr: addr})
	require.NoError(t, err)
	defer second.Close()
	require.Eventually(t, func() bool {
		lctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := store.Load(lctx, "w0")
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "the store did not recover")
	time.Sleep(700 * time.Millisecond) // writers go on after the restart
	close(stop)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d commits acknowledged, %d unknown or conflicting around the restart, %d failed before sending",
		len(acked), unknown, len(failures))
	for _, err := range failures {
		// A commit that never reached the server (its seq block could not be reserved).
		assert.Contains(t, err.Error(), "reserving", "an unexpected kind of failure: %v", err)
	}
	pending, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	events := map[string]bool{}
	for _, p := range pending {
		events[string(p.Event)] = true
	}
	for _, c := range acked {
		got, err := store.Load(ctx, c.id)
		require.NoError(t, err)
		assert.GreaterOrEqual(t, got.Version, c.version, "%s lost an acknowledged version", c.id)
		assert.True(t, events[c.event], "acknowledged event %s lost", c.event)
	}
	assert.NotEmpty(t, acked)

	// The collection's invariants: each outbox entry belongs to a committed version, and the
	// pending count matches the entries.
	docs, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	for _, p := range docs {
		got, err := store.Load(ctx, p.SourceID)
		require.NoError(t, err)
		assert.LessOrEqual(t, p.Version, got.Version, "outbox entry %d beyond its execution's version", p.Seq)
	}
	client, err := mongo.Connect(options.Client().ApplyURI(second.URI()))
	require.NoError(t, err)
	defer client.Disconnect(ctx)
	cur, err := client.Database("restart").Collection("executions").Find(ctx, bson.D{})
	require.NoError(t, err)
	for cur.Next(ctx) {
		elems, err := cur.Current.Lookup("outbox").Document().Elements()
		require.NoError(t, err)
		n, _ := cur.Current.Lookup("outbox_n").AsInt64OK()
		assert.EqualValues(t, len(elems), n, "outbox_n of %s", cur.Current.Lookup("_id"))
	}
	require.NoError(t, cur.Err())
}
