package main

import (
	"context"
	"encoding/json"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/journal"
	"github.com/execstore/execstore/server"
)

// `journal list` pages the invocations in id order, by latest attempt state and owner, and
// never prints a sealed payload: the fixture's pay-1 (succeeded after an unknown attempt),
// and here pay-2 handed out with no receipt (pending) and pay-3 claimed only (none).
func TestJournalList(t *testing.T) {
	f := populate(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ring, err := journal.NewKeyRing(journal.NewKey("k2"))
	require.NoError(t, err)
	j, err := journal.Open(ctx, srv.URI, ring, journal.Options{AcceptWeakDurability: true, Connection: server.Connection{Database: f.db}})
	require.NoError(t, err)
	defer func() { require.NoError(t, j.Close(ctx)) }()
	f2, err := j.Claim(ctx, journal.Identity{ID: "pay-2", Scope: "shop/payments", Digest: "sha256:22"}, "worker-b")
	require.NoError(t, err)
	f2, c2, err := j.Checkpoint(ctx, f2, journal.PhaseBefore, []byte("pay-2 state"))
	require.NoError(t, err)
	f2, err = j.Prepare(ctx, f2, c2, []byte("pay-2 operation"))
	require.NoError(t, err)
	_, err = j.Dispatch(ctx, f2)
	require.NoError(t, err)
	_, err = j.Claim(ctx, journal.Identity{ID: "pay-3", Scope: "shop/payments", Digest: "sha256:33"}, "worker-b")
	require.NoError(t, err)

	text := f.inspect(t, "journal", "list")
	rows := columns(text)
	require.Len(t, rows, 5, text)
	requireRow(t, []string{"invocations: 3; last page"}, rows[0])
	requireRow(t, []string{"INVOCATION", "OWNER", "REVISION", "PHASE", "ATTEMPTS", "LATEST", "NO REPLAY", "RECEIPT AT"}, rows[1])
	requireRow(t, []string{"pay-1", "worker-a", `\d+`, "before", "1", "succeeded", "yes", `\d{4}-\d\d-\d\dT[\d:.]+Z`}, rows[2])
	requireRow(t, []string{"pay-2", "worker-b", `\d+`, "before", "1", "pending", "no", "-"}, rows[3])
	requireRow(t, []string{"pay-3", "worker-b", "1", "-", "0", "none", "no", "-"}, rows[4])
	for _, p := range append(sealedPlaintexts, "pay-2 state", "pay-2 operation") {
		assert.NotContains(t, text, p)
	}

	assert.Regexp(t, `(?m)^  pay-2 `, f.inspect(t, "journal", "list", "-state", "pending"))
	assert.NotRegexp(t, `pay-[13]`, f.inspect(t, "journal", "list", "-state", "pending"))
	byOwner := f.inspect(t, "journal", "list", "-owner", "worker-a")
	assert.Contains(t, byOwner, "invocations: 1; last page")

	var page inspect.InvocationPage
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "journal", "list", "-limit", "1", "-json")), &page))
	require.Len(t, page.Items, 1)
	assert.Equal(t, "pay-1", page.Items[0].ID)
	require.NotEmpty(t, page.NextCursor)
	next := f.inspect(t, "journal", "list", "-limit", "1", "-after", page.NextCursor)
	assert.Regexp(t, regexp.MustCompile(`(?m)^  pay-2 `), next)

	r := cli(t, "-uri", srv.URI, "-db", f.db, "journal", "list", "-state", "stuck")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.stderr, `-state "stuck"`)
}
