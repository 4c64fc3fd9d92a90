package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/ops"
)

// TestExecutionsSorted checks the executions' order: by id by default; by created or updated
// time either way round, from ?sort= and ?order= or a column's link (a first click sorts a
// time's column newest first, the next turns it over), with cursor paging that keeps the
// order; a time not recorded shown as "-"; a bad order or a cursor of another order refused
// with 400; and only finds sent.
func TestExecutionsSorted(t *testing.T) {
	db := testserver.Database(t, "ui")
	fill(t, srv.URI, db)
	// A document written before the store stamped its times.
	_, err := testserver.Collection(t, srv.URI, db, ops.ExecutionsCollection).UpdateOne(context.Background(),
		bson.D{{Key: "_id", Value: "order-4"}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: ops.FieldCreatedAt, Value: ""}, {Key: ops.FieldUpdatedAt, Value: ""}}}})
	require.NoError(t, err)
	m := newMonitored(t)
	ts := httptest.NewServer(Handler(Options{Database: m.client.Database(db)}))
	t.Cleanup(ts.Close)

	list := func(query string) inspect.ExecutionPage {
		t.Helper()
		resp, body := get(t, ts, http.MethodGet, "/executions?format=json&"+query)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", query, body)
		var p inspect.ExecutionPage
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		return p
	}
	all := func(query string) []inspect.ExecutionSummary {
		t.Helper()
		var out []inspect.ExecutionSummary
		after := ""
		for range 20 {
			p := list(query + "&limit=2&after=" + after)
			out = append(out, p.Items...)
			if after = p.NextCursor; after == "" {
				return out
			}
		}
		t.Fatalf("%s: no last page", query)
		return nil
	}
	ids := func(items []inspect.ExecutionSummary) []string {
		var out []string
		for _, s := range items {
			out = append(out, s.ID)
		}
		return out
	}
	byID := all("")
	require.Equal(t, []string{"order-1", "order-2", "order-3", "order-4", "order-5", "ship-1", "ship-2"}, ids(byID))
	for _, s := range byID {
		if s.ID == "order-4" {
			require.Empty(t, s.CreatedAt+s.UpdatedAt)
		} else {
			require.NotEmpty(t, s.CreatedAt, s.ID)
			require.False(t, instant(t, s.UpdatedAt).Before(instant(t, s.CreatedAt)), s.ID)
		}
	}
	reversed := ids(byID)
	slices.Reverse(reversed)
	require.Equal(t, reversed, ids(all("order=desc")))

	for _, field := range []string{"created", "updated"} {
		at := func(s inspect.ExecutionSummary) string {
			if field == "created" {
				return s.CreatedAt
			}
			return s.UpdatedAt
		}
		up := all("sort=" + field)
		require.Len(t, up, len(byID), field)
		require.Equal(t, "order-4", up[0].ID, "%s: no time comes first", field)
		require.True(t, slices.IsSortedFunc(up[1:], func(a, b inspect.ExecutionSummary) int {
			if c := instant(t, at(a)).Compare(instant(t, at(b))); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		}), "%s: %v", field, up)
		down := all("sort=" + field + "&order=desc")
		slices.Reverse(down)
		require.Equal(t, ids(up), ids(down), field)
	}
	// order-1's last commit came before the others were created, and ship-1's after.
	updated := ids(all("sort=updated&order=desc"))
	require.Less(t, slices.Index(updated, "ship-1"), slices.Index(updated, "order-1"))

	_, page := get(t, ts, http.MethodGet, "/executions")
	require.Contains(t, page, `<a class="sort" href="?order=desc&amp;sort=created">Created</a>`)
	require.Contains(t, page, `<th aria-sort="ascending"><a class="sort" href="?order=desc&amp;sort=id">ID ↑</a></th>`)
	require.Contains(t, page, `<td><span class="muted">-</span></td><td><span class="muted">-</span></td>`, "order-4's times")
	_, page = get(t, ts, http.MethodGet, "/executions?sort=updated&order=desc&status=RUNNING&limit=1")
	require.Contains(t, page, `<th aria-sort="descending"><a class="sort" href="?limit=1&amp;order=asc&amp;sort=updated&amp;status=RUNNING">Updated ↓</a></th>`)
	require.Contains(t, page, `<option value="updated" selected>updated</option>`)
	require.Contains(t, page, `<option value="desc" selected>descending</option>`)
	require.Contains(t, page, `rel="next" href="?after=`)
	require.Contains(t, page, `<time datetime="20`)

	cursor := list("sort=created&limit=1").NextCursor
	for query, msg := range map[string]string{
		"sort=age":                     `unknown order &#34;age&#34;`,
		"order=up":                     `order must be asc or desc`,
		"sort=updated&after=" + cursor: `the cursor resumes a listing by created ascending, not by updated ascending`,
		"sort=created&order=desc&after=" + cursor: `not by created descending`,
		"sort=created&after=order-2":              `is not a cursor of a listing by created`,
	} {
		resp, body := get(t, ts, http.MethodGet, "/executions?"+query)
		require.Equal(t, http.StatusBadRequest, resp.StatusCode, query)
		require.Contains(t, body, msg, query)
	}
	for name := range m.commands() {
		require.Contains(t, readCommands, name, "sent %q, not a read", name)
	}
}

// instant is the time a listing wrote as at. Times are compared as instants, never as text: a
// time on a whole second is written without its milliseconds, so "…:25Z" sorts after
// "…:25.002Z" as a string.
func instant(t *testing.T, at string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339Nano, at)
	require.NoError(t, err, at)
	return v
}
