package aio_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	mongoevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/server"
)

// Every bulk write the store sends — group commits, coalesced acks, timer deletes — lists its
// statements by _id, on the wire (a merged statement's documents, by its _id $in, too): two bulks over the same executions take row locks in one
// order, so they cannot deadlock on an engine that locks rows in statement order.
func TestBulkStatementsInIDOrder(t *testing.T) {
	var mu sync.Mutex
	var bulks [][]string // the _ids of each update command with more than one statement
	monitor := &mongoevent.CommandMonitor{Started: func(_ context.Context, e *mongoevent.CommandStartedEvent) {
		if e.CommandName != "update" {
			return
		}
		vals, err := e.Command.Lookup("updates").Array().Values()
		if err != nil {
			return
		}
		var ids []string
		for _, v := range vals {
			id := v.Document().Lookup("q", "_id")
			if s, ok := id.StringValueOK(); ok {
				ids = append(ids, s)
				continue
			}
			// A merged statement (the FerretDB profile's acks and timer deletes): its
			// documents, in the order its $in lists them.
			in, _ := id.Document().Lookup("$in").Array().Values()
			for _, x := range in {
				ids = append(ids, x.StringValue())
			}
		}
		if len(ids) < 2 {
			return
		}
		mu.Lock()
		bulks = append(bulks, ids)
		mu.Unlock()
	}}
	db := testDatabase(t)
	store, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: db, ClientOptions: options.Client().SetMonitor(monitor)}})
	require.NoError(t, err)
	defer func() { _ = store.Close(bg) }()
	t.Cleanup(func() { dropDatabase(t, db) })

	const n = 48
	exes := make([]*execstore.Execution, n)
	for i := range exes {
		// Ids whose creation order is not their sort order.
		exes[i] = &execstore.Execution{ID: fmt.Sprintf("x%02d", (i*37)%n), DefinitionID: "d", Status: execstore.Running, Data: []byte("{}")}
		require.NoError(t, store.Save(bg, exes[i]))
	}
	for round := range 3 {
		var g errgroup.Group
		for i := n - 1; i >= 0; i-- {
			g.Go(func() error {
				_, err := store.Commit(bg, exes[i], execstore.Commit{
					Emits:  []execstore.Emit{{TargetID: "t", Event: []byte("e")}},
					Timers: []execstore.TimerOp{execstore.ScheduleTimer(fmt.Sprintf("T%d", round), unixAt(1))}})
				return err
			})
		}
		require.NoError(t, g.Wait())
	}
	pending, err := store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	var g errgroup.Group
	for i := len(pending) - 1; i >= 0; i-- {
		g.Go(func() error { return store.AckOutbox(bg, pending[i].SourceID, pending[i].Seq) })
	}
	require.NoError(t, g.Wait())
	due, err := store.DueTimers(bg, unixAt(2), 0)
	require.NoError(t, err)
	sort.Slice(due, func(i, j int) bool { return due[i].ExecutionID > due[j].ExecutionID }) // reversed
	require.NoError(t, store.DeleteTimers(bg, due))

	mu.Lock()
	defer mu.Unlock()
	require.NotEmpty(t, bulks, "no bulk write of two or more statements was sent")
	for _, ids := range bulks {
		assert.True(t, sort.StringsAreSorted(ids), "statements out of _id order: %v", ids)
	}
	t.Logf("%d bulk writes of 2 to %d statements, each in _id order", len(bulks), maxLen(bulks))
}

func maxLen(bulks [][]string) int {
	m := 0
	for _, b := range bulks {
		m = max(m, len(b))
	}
	return m
}
