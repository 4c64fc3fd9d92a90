package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/server"
)

// columns splits text output into its lines' cells: cells are separated by two spaces or
// more.
func columns(s string) [][]string {
	var rows [][]string
	for line := range strings.Lines(s) {
		rows = append(rows, regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1))
	}
	return rows
}

// requireRow checks a row's cells against patterns, each anchored.
func requireRow(t *testing.T, patterns []string, row []string) {
	t.Helper()
	require.Len(t, row, len(patterns), "%q", row)
	for i, p := range patterns {
		require.Regexp(t, "^(?:"+p+")$", row[i], "cell %d of %q", i, row)
	}
}

// TestIdemList checks `idem list`: the records idem wrote under a prefix, one row each in
// key order, with neither claim tokens nor header values nor bodies; keyset paging that
// follows the printed cursor or resumes after a plain key; JSON records shaped as `idem get`
// prints them.
func TestIdemList(t *testing.T) {
	f := populate(t)
	ctx := context.Background()
	idems, err := idem.Open(ctx, srv.URI, idem.Options{Connection: server.Connection{Database: f.db}, ReapInterval: -1})
	require.NoError(t, err)
	defer idems.Close(ctx)
	mine, err := idems.Claim(ctx, "req-mine", "fp-mine", 3, time.Hour)
	require.NoError(t, err)
	_, err = idems.Claim(ctx, "res-1", "fp-other", 1, time.Hour) // another prefix
	require.NoError(t, err)

	text := f.inspect(t, "idem", "list", "req-")
	rows := columns(text)
	require.Len(t, rows, 7, text)
	requireRow(t, []string{"KEY", "STATE", "FINGERPRINT", "CLAIMED AT", "UNTIL", "FROM NOW", "LAPSED", "RESPONSE"}, rows[0])
	const at, live = `\d{4}-\d\d-\d\dT[\d:.]+Z`, `in (59m\d+s|1h)`
	requireRow(t, []string{"req-claimed", "CLAIMED", `fp-claimed \(v1\)`, at, "lease " + at, live, "no", "-"}, rows[1])
	requireRow(t, []string{"req-done", "COMPLETED", `fp-done \(v2\)`, at, "retention " + at, "in (23h59m|1d)", "no",
		"201, 2 headers, 29 bytes"}, rows[2])
	requireRow(t, []string{"req-lapsed", "CLAIMED", `fp-lapsed \(v1\)`, at, "lease " + at, `now|\d+s ago`, "yes", "-"}, rows[3])
	requireRow(t, []string{"req-mine", "CLAIMED", `fp-mine \(v3\)`, at, "lease " + at, live, "no", "-"}, rows[4])
	require.Equal(t, []string{""}, rows[5])
	requireRow(t, []string{`4 records; last page \(now ` + at + `, server clock\)`}, rows[6])
	for _, secret := range []string{mine.Token, "hdr-secret-value", `"ok":true`, "application/json", "res-1"} {
		require.NotContains(t, text, secret)
	}

	var page inspect.IdemPage
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "idem", "list", "req-", "-json")), &page))
	require.Equal(t, "req-", page.Prefix)
	require.Empty(t, page.NextCursor)
	require.Equal(t, "server", page.Clock)
	require.Len(t, page.Items, 4)
	done := page.Items[1]
	require.Equal(t, "req-done", done.Key)
	require.Equal(t, "retention", done.UntilIs)
	require.Equal(t, &inspect.IdemResponse{Status: 201, HeaderNames: []string{"Content-Type", "X-Session"}, BodyBytes: 29}, done.Response)
	require.True(t, page.Items[2].Lapsed)
	require.Equal(t, "lease", page.Items[2].UntilIs)

	// Each record has the shape `idem get -json` gives it, and the same values.
	var listed, got map[string]any
	js := f.inspect(t, "idem", "list", "req-d", "-json")
	require.NotContains(t, js, mine.Token)
	require.NotContains(t, js, `"body"`)
	require.NoError(t, json.Unmarshal([]byte(js), &page))
	require.Len(t, page.Items, 1)
	item, err := json.Marshal(page.Items[0])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(item, &listed))
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "idem", "get", "req-done", "-json")), &got))
	listed["now"], got["now"] = "TIME", "TIME"
	require.Equal(t, got, listed)

	// Paging: the text names the next page's flag; -json gives the cursor; a plain key
	// resumes after it.
	first := f.inspect(t, "idem", "list", "req-", "-limit", "1")
	require.Regexp(t, `(?m)^1 record; next page: -after AXJlcS1jbGFpbWVk \(now `, first)
	var keys []string
	cursor := ""
	for range 5 {
		var page inspect.IdemPage
		require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "idem", "list", "req-", "-json", "-limit", "3", "-after", cursor)), &page))
		for _, r := range page.Items {
			keys = append(keys, r.Key)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Equal(t, []string{"req-claimed", "req-done", "req-lapsed", "req-mine"}, keys)
	page = inspect.IdemPage{}
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "idem", "list", "re", "-json", "-after", "req-lapsed")), &page))
	require.Len(t, page.Items, 2)
	require.Equal(t, "req-mine", page.Items[0].Key)
	require.Equal(t, "res-1", page.Items[1].Key)

	require.Regexp(t, `^no idempotency records under nope- \(now `+at+`, server clock\)\n$`, f.inspect(t, "idem", "list", "nope-"))
	require.JSONEq(t, `{"prefix": "nope-", "items": [], "now": "TIME", "clock": "server"}`,
		normalised(f.inspect(t, "idem", "list", "nope-", "-json")))
}
