package main

import (
	"cmp"
	"context"
	"encoding/json"
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

// TestListSorted checks `list -sort created|updated [-desc]` and `-desc` in id order: every
// page size pages through every execution once, in (time, id) order, those without the time
// (documents written before it was stamped) below any time, ties on a time broken by id;
// a cursor of another order and an unknown order are refused.
func TestListSorted(t *testing.T) {
	db := testDatabase(t)
	coll := testserver.Collection(t, srv.URI, db, ops.ExecutionsCollection)
	at := func(s int) time.Time { return time.Date(2026, 3, 1, 12, 0, s, 0, time.UTC) }
	type row struct {
		id               string
		created, updated time.Time // zero for none
	}
	rows := []row{
		{"a", at(1), at(5)},
		{"b", at(1), at(3)},       // created with a
		{"c", time.Time{}, at(3)}, // updated with b; no created (written before it was stamped)
		{"d", time.Time{}, time.Time{}},
		{"e", at(2), at(4)},
		{"f", time.Time{}, time.Time{}},
		{"g", at(2), at(2)},
	}
	ctx := context.Background()
	for _, r := range rows {
		doc := bson.D{{Key: "_id", Value: r.id}, {Key: ops.FieldDefinitionID, Value: "d"},
			{Key: ops.FieldStatus, Value: "RUNNING"}, {Key: ops.FieldVersion, Value: int64(1)}}
		if !r.created.IsZero() {
			doc = append(doc, bson.E{Key: ops.FieldCreatedAt, Value: r.created})
		}
		if !r.updated.IsZero() {
			doc = append(doc, bson.E{Key: ops.FieldUpdatedAt, Value: r.updated})
		}
		_, err := coll.InsertOne(ctx, doc)
		require.NoError(t, err)
	}
	f := fixture{db: db}
	for _, c := range []struct {
		sort string
		key  func(row) time.Time
	}{
		{"id", func(row) time.Time { return time.Time{} }},
		{"created", func(r row) time.Time { return r.created }},
		{"updated", func(r row) time.Time { return r.updated }},
	} {
		for _, desc := range []bool{false, true} {
			want := slices.Clone(rows)
			slices.SortFunc(want, func(a, b row) int {
				n := cmp.Or(c.key(a).Compare(c.key(b)), strings.Compare(a.id, b.id))
				if desc {
					return -n
				}
				return n
			})
			var wantIDs []string
			for _, r := range want {
				wantIDs = append(wantIDs, r.id)
			}
			args := []string{"list", "-json", "-sort", c.sort}
			if desc {
				args = append(args, "-desc")
			}
			for _, limit := range []string{"1", "3", "100"} {
				var seen []string
				cursor := ""
				for range len(rows) + 1 {
					var page inspect.ExecutionPage
					require.NoError(t, json.Unmarshal([]byte(f.inspect(t, append(args, "-limit", limit, "-after", cursor)...)), &page))
					for _, s := range page.Items {
						seen = append(seen, s.ID)
					}
					if cursor = page.NextCursor; cursor == "" {
						break
					}
				}
				require.Equal(t, wantIDs, seen, "%v, pages of %s", args, limit)
			}
		}
	}

	var page inspect.ExecutionPage
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "list", "-json", "-sort", "updated", "-limit", "1")), &page))
	require.Equal(t, []inspect.ExecutionSummary{{ID: "d", Definition: "d", Status: "RUNNING", Version: 1}}, page.Items,
		"no times: none shown")
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "list", "-json", "-sort", "created", "-desc", "-limit", "1")), &page))
	require.Equal(t, []inspect.ExecutionSummary{{ID: "g", Definition: "d", Status: "RUNNING", Version: 1,
		CreatedAt: "2026-03-01T12:00:02Z", UpdatedAt: "2026-03-01T12:00:02Z"}}, page.Items)
	r := cli(t, "-uri", srv.URI, "-db", db, "list", "-sort", "updated", "-after", page.NextCursor)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "the cursor resumes a listing by created descending, not by updated ascending")
	r = cli(t, "-uri", srv.URI, "-db", db, "list", "-sort", "age")
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, `unknown order "age"`)
	require.Equal(t, `ID  DEFINITION  STATUS   PARENT  VERSION  CREATED  UPDATED
c   d           RUNNING  -       1        -        2026-03-01T12:00:03Z

1 execution; next page: -after a3sicyI6ImNyZWF0ZWQiLCJpZCI6ImMifQ
`, f.inspect(t, "list", "-sort", "created", "-limit", "1"), "a time not recorded is shown as -")
}
