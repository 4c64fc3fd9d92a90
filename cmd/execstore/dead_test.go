package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/deadaction"
	"github.com/execstore/execstore/internal/inspect"
)

// TestDead checks `dead`: the dead items as a relay left them, newest first, grouped by
// last error, filtered by kind, error text, age, and cut to -limit.
func TestDead(t *testing.T) {
	empty := populateNothing(t)
	require.Equal(t, "dead: none\n", empty.inspect(t, "dead"))

	f, store := deadFixture(t)
	ctx := context.Background()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var sel inspect.DeadSelection
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json")), &sel))
	require.Len(t, sel.Items, 2)
	require.Equal(t, 2, sel.Matched)
	require.Len(t, sel.Groups, 2, "two last errors")
	for _, d := range sel.Items {
		require.Equal(t, 1, d.Attempts)
		require.NotEmpty(t, d.Definition)
		_, err := deadaction.ParseRef(d.Ref)
		require.NoError(t, err, d.Ref)
	}

	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json", "-kind", "timer")), &sel))
	require.Len(t, sel.Items, 1)
	require.NotEmpty(t, sel.Items[0].Path)
	require.Equal(t, "2026-03-01T12:01:00Z", sel.Items[0].DeadAt)
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json", "-error", "SHIP")), &sel))
	require.Len(t, sel.Items, 1, "the error text, ignoring case")
	require.Equal(t, "cannot ship", sel.Items[0].LastError)
	require.Equal(t, "2026-03-01T12:00:00Z", sel.Items[0].DeadAt)
	deadEntry := sel.Items[0]
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json", "-limit", "1")), &sel))
	require.Len(t, sel.Items, 1)
	require.Equal(t, "timer", sel.Items[0].Kind, "the newest")
	require.Equal(t, 2, sel.Matched)
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json", "-older-than", "1h")), &sel))
	require.Len(t, sel.Items, 2, "dead in 2026, before the tests' now")
	text := f.inspect(t, "dead")
	require.Contains(t, text, "dead: 2 items, newest first, by last error\n")
	require.Contains(t, text, "  \"cannot ship\": 1 item, the newest dead at 2026-03-01T12:00:00Z\n")

	// show: the execution's dead items, and the attempts of a pending entry.
	all, err := store.PendingOutbox(ctx, 0)
	require.NoError(t, err)
	var p []execstore.OutboxEntry
	for _, e := range all {
		if e.SourceID == deadEntry.Execution {
			p = append(p, e)
		}
	}
	require.NotEmpty(t, p, "the execution with the dead entry has a pending one")
	_, ok, err := store.Fail(ctx, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: p[0].SourceID, Seq: p[0].Seq},
		execstore.Failure{Error: "retrying", At: at})
	require.NoError(t, err)
	require.True(t, ok)
	var shown inspect.Execution
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "show", deadEntry.Execution, "-json")), &shown))
	require.NotEmpty(t, shown.Dead)
	require.Equal(t, "cannot ship", shown.Dead[0].LastError)
	var found bool
	for _, e := range shown.Outbox {
		if e.Seq == p[0].Seq {
			found = true
			require.EqualValues(t, 1, e.Attempts)
			require.Equal(t, "retrying", e.LastError)
		}
	}
	require.True(t, found, "the execution with the dead entry has the failed pending entry %d", p[0].Seq)
	require.Contains(t, f.inspect(t, "show", deadEntry.Execution), "cannot ship")
}
