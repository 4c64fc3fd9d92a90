package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/server"
)

// deadFixture is populate with a dead outbox entry ("cannot ship") and a dead timer ("late").
func deadFixture(t *testing.T) (fixture, *aio.Store) {
	t.Helper()
	f := populate(t)
	ctx := context.Background()
	store, err := aio.Open(ctx, srv.URI, aio.Options{Connection: server.Connection{Database: f.db}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close(context.Background()) })
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
		execstore.Failure{Error: "late", At: at.Add(time.Minute), Dead: true})
	require.NoError(t, err)
	require.True(t, ok)
	return f, store
}

// deadRefs are the names of the dead items f holds, newest first.
func deadRefs(t *testing.T, f fixture) []string {
	t.Helper()
	var sel inspect.DeadSelection
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "dead", "-json")), &sel))
	var out []string
	for _, d := range sel.Items {
		out = append(out, d.Ref)
	}
	return out
}

// TestReviveAndDiscard checks `revive` and `discard`: nothing without a selection, a dry run
// without -yes, each item's outcome with it, logged with the local user; acting twice
// finds nothing to do.
func TestReviveAndDiscard(t *testing.T) {
	f, store := deadFixture(t)
	args := func(a ...string) []string { return append([]string{"-uri", srv.URI, "-db", f.db}, a...) }
	refs := deadRefs(t, f)
	require.Len(t, refs, 2)
	timerRef, outboxRef := refs[0], refs[1]
	require.True(t, strings.HasPrefix(timerRef, "timer "), timerRef)

	for _, bad := range [][]string{
		{"revive"},
		{"discard", "-yes"},
		{"revive", "-item", outboxRef, "-kind", "outbox"},
		{"revive", "-item", outboxRef, "-all"},
		{"revive", "-item", "outbox nothing"},
		{"revive", "-kind", "letter"},
		{"discard", "-older-than", "-1h"},
	} {
		r := cli(t, args(bad...)...)
		assert.Equal(t, exitUsage, r.code, "%q: %s", bad, r.stdout)
		assert.NotEmpty(t, r.stderr)
	}
	require.Equal(t, refs, deadRefs(t, f), "bad usage writes nothing")

	dry := f.inspect(t, "revive", "-kind", "outbox")
	assert.Equal(t, "dry run: 1 item would be revived; run again with -yes to do it\n  "+outboxRef+"\n", dry)
	require.Equal(t, refs, deadRefs(t, f), "a dry run writes nothing")

	r := cli(t, args("revive", "-kind", "outbox", "-yes")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "revive: 1 revived\n  "+outboxRef+": done\n", r.stdout)
	assert.Contains(t, r.stderr, `msg="dead item revive" user=`)
	assert.Contains(t, r.stderr, `item="`+outboxRef+`" outcome=done`)
	require.Equal(t, []string{timerRef}, deadRefs(t, f))
	pending, err := store.PendingOutbox(context.Background(), 0)
	require.NoError(t, err)
	assert.Contains(t, pendingNames(pending), outboxRef, "revived: pending again")

	r = cli(t, args("revive", "-kind", "outbox", "-yes")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "revive: nothing to do\n", r.stdout)

	r = cli(t, args("discard", "-item", timerRef, "-yes", "-json")...)
	require.Equal(t, 0, r.code, r.stderr)
	var rep actReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
	assert.Equal(t, map[string]int{"done": 1}, rep.Counts)
	assert.False(t, rep.DryRun)
	assert.Empty(t, deadRefs(t, f))
	r = cli(t, args("discard", "-item", timerRef, "-yes")...)
	require.Equal(t, 0, r.code, r.stderr)
	assert.Equal(t, "discard: 1 not dead\n  "+timerRef+": not dead\n", r.stdout)
}

func pendingNames(p []execstore.OutboxEntry) []string {
	var out []string
	for _, e := range p {
		out = append(out, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: e.SourceID, Seq: e.Seq}.String())
	}
	return out
}

// TestUIActionsNeedAuthentication: ui -actions without a user and password is bad usage,
// before it listens.
func TestUIActionsNeedAuthentication(t *testing.T) {
	f := populateNothing(t)
	r := cli(t, "-uri", srv.URI, "-db", f.db, "ui", "-actions", "-listen", "127.0.0.1:0")
	require.Equal(t, exitUsage, r.code, r.stdout)
	require.Contains(t, r.stderr, "-actions needs basic authentication")
}
