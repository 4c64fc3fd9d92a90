package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/server"
)

// TestDead checks `dead`: one page of dead items, as a relay left them, filtered by kind
// and execution, with the cursor to the next page.
func TestDead(t *testing.T) {
	empty := populateNothing(t)
	require.Equal(t, "dead: none\n", empty.inspect(t, "dead"))

	f := populate(t)
	ctx := context.Background()
	store, err := aio.Open(ctx, srv.URI, aio.Options{Connection: server.Connection{Database: f.db}})
	require.NoError(t, err)
	defer store.Close(ctx)
	p, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	require.NotEmpty(t, p)
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	_, ok, err := store.Fail(ctx, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: p[0].SourceID, Seq: p[0].Seq},
		execstore.Failure{Error: "cannot ship", At: at, Dead: true})
	require.NoError(t, err)
	require.True(t, ok)
	due, err := store.DueTimers(ctx, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	require.NoError(t, err)
	require.NotEmpty(t, due)
	_, ok, err = store.Fail(ctx, execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: due[0].ExecutionID, Path: due[0].Path, FireAt: due[0].FireAt},
		execstore.Failure{Error: "late", At: at, Dead: true})
	require.NoError(t, err)
	require.True(t, ok)

	var page inspect.DeadPage
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json")), &page))
	require.Len(t, page.Items, 2)
	require.Equal(t, "cannot ship", page.Items[0].LastError)
	require.Equal(t, 1, page.Items[0].Attempts)
	require.Equal(t, "2026-03-01T12:00:00Z", page.Items[0].DeadAt)

	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json", "-kind", "timer")), &page))
	require.Len(t, page.Items, 1)
	require.Equal(t, due[0].Path, page.Items[0].Path)
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json", "-limit", "1")), &page))
	require.Len(t, page.Items, 1)
	require.NotEmpty(t, page.NextCursor)
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json", "-limit", "1", "-cursor", page.NextCursor)), &page))
	require.Len(t, page.Items, 1)
	require.Contains(t, f.inspect(t, "dead"), "dead: 2 items\n")

	// show: the execution's dead items, and the attempts of a pending entry.
	_, ok, err = store.Fail(ctx, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: p[1].SourceID, Seq: p[1].Seq},
		execstore.Failure{Error: "retrying", At: at})
	require.NoError(t, err)
	require.True(t, ok)
	var shown inspect.Execution
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "show", p[0].SourceID, "-json")), &shown))
	require.NotEmpty(t, shown.Dead)
	require.Equal(t, "cannot ship", shown.Dead[0].LastError)
	var found bool
	for _, e := range shown.Outbox {
		if e.Seq == p[1].Seq {
			found = true
			require.EqualValues(t, 1, e.Attempts)
			require.Equal(t, "retrying", e.LastError)
		}
	}
	require.True(t, found)
	require.Contains(t, f.inspect(t, "show", p[0].SourceID), "cannot ship")
}
