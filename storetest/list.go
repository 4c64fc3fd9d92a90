package storetest

import (
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// Listing: filters AND together, statuses are a set, roots only keeps executions without a
// parent; pages of any size reassemble to exactly the matching ids, ordered by id, holding
// summaries only; a garbage cursor is ErrInvalid.
func listing(t *testing.T, s execstore.Store) {
	type row struct {
		id, def string
		status  execstore.Status
		parent  string
	}
	rows := []row{
		{"a1", "A", execstore.Running, ""}, {"a2", "A", execstore.Done, ""}, {"a3", "A", execstore.Running, "a1"},
		{"b1", "B", execstore.Failed, ""}, {"b2", "B", execstore.Running, "b1"}, {"b3", "B", execstore.Done, ""},
		{"c1", "C", execstore.Suspended, ""}, {"c2", "C", execstore.Cancelled, "a1"}, {"c3", "C", execstore.Pending, ""},
		{"c4", "C", execstore.Running, ""}, {"c5", "C", execstore.Cancelling, "c4"},
	}
	for _, r := range rows {
		e := &execstore.Execution{ID: r.id, DefinitionID: r.def, Status: r.status, ParentID: r.parent, Data: []byte("big snapshot")}
		require.NoError(t, s.Save(bg, e))
	}
	listAll := func(q execstore.ListQuery) []string {
		var ids []string
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100)
			page, err := s.List(bg, q)
			require.NoError(t, err)
			for _, it := range page.Items {
				ids = append(ids, it.ID)
				assert.EqualValues(t, 1, it.Version)
			}
			if page.NextCursor == "" {
				return ids
			}
			q.Cursor = page.NextCursor
		}
	}
	expect := func(keep func(row) bool) []string {
		var ids []string
		for _, r := range rows {
			if keep(r) {
				ids = append(ids, r.id)
			}
		}
		sort.Strings(ids)
		return ids
	}
	cases := []struct {
		name string
		q    execstore.ListQuery
		keep func(row) bool
	}{
		{"all", execstore.ListQuery{}, func(row) bool { return true }},
		{"definition", execstore.ListQuery{DefinitionID: "A"}, func(r row) bool { return r.def == "A" }},
		{"definition+status", execstore.ListQuery{DefinitionID: "A", Statuses: []execstore.Status{execstore.Running}},
			func(r row) bool { return r.def == "A" && r.status == execstore.Running }},
		{"status set", execstore.ListQuery{Statuses: []execstore.Status{execstore.Done, execstore.Failed}},
			func(r row) bool { return r.status == execstore.Done || r.status == execstore.Failed }},
		{"roots", execstore.ListQuery{RootsOnly: true}, func(r row) bool { return r.parent == "" }},
		{"roots+definition+status", execstore.ListQuery{RootsOnly: true, DefinitionID: "C",
			Statuses: []execstore.Status{execstore.Running, execstore.Pending, execstore.Cancelled}},
			func(r row) bool {
				return r.parent == "" && r.def == "C" && (r.status == execstore.Running || r.status == execstore.Pending)
			}},
		{"nothing", execstore.ListQuery{DefinitionID: "Z"}, func(row) bool { return false }},
	}
	for _, c := range cases {
		for _, limit := range []int{0, 1, 2, 3, 100} {
			q := c.q
			q.Limit = limit
			assert.Equal(t, expect(c.keep), listAll(q), "%s limit %d", c.name, limit)
		}
	}
	page, err := s.List(bg, execstore.ListQuery{Limit: 2, DefinitionID: "B"})
	require.NoError(t, err)
	require.Len(t, page.Items, 2)
	assert.Equal(t, execstore.Summary{ID: "b1", DefinitionID: "B", Status: execstore.Failed, Version: 1}, page.Items[0])
	assert.Equal(t, execstore.Summary{ID: "b2", DefinitionID: "B", Status: execstore.Running, ParentID: "b1", Version: 1}, page.Items[1])
	assert.NotEmpty(t, page.NextCursor)
	last, err := s.List(bg, execstore.ListQuery{Limit: 1, DefinitionID: "B", Cursor: page.NextCursor})
	require.NoError(t, err)
	assert.Equal(t, []string{"b3"}, []string{last.Items[0].ID})
	assert.Empty(t, last.NextCursor)

	for _, bad := range []string{"garbage", "!!!", "AQ", "Ag", "AGFiYw", "%%%", "\x00"} {
		_, err := s.List(bg, execstore.ListQuery{Cursor: bad})
		assert.ErrorIs(t, err, execstore.ErrInvalid, "cursor %q", bad)
	}
}
