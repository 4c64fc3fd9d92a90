package memstore_test

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/memstore"
)

// listAll pages through q and returns the ids, checking that each page holds summaries in id
// order.
func listAll(t *testing.T, s *memstore.Store, q execstore.ListQuery) []string {
	t.Helper()
	var ids []string
	for pages := 0; ; pages++ {
		require.Less(t, pages, 100)
		page, err := s.List(bg, q)
		require.NoError(t, err)
		if q.Limit > 0 {
			assert.LessOrEqual(t, len(page.Items), q.Limit)
		}
		for _, sum := range page.Items {
			ids = append(ids, sum.ID)
		}
		if page.NextCursor == "" {
			return ids
		}
		assert.Len(t, page.Items, max(q.Limit, 1), "a page before the last one is full")
		q.Cursor = page.NextCursor
	}
}

// 16. Filters alone and combined, reassembled over small pages, give exactly the matching ids
// in id order; a page holds summaries only.
func TestListing(t *testing.T) {
	s := memstore.New(memstore.Options{})
	type row struct {
		id, def string
		status  execstore.Status
		parent  string
	}
	rows := []row{
		{"c5", "C", execstore.Cancelling, "c4"}, {"a2", "A", execstore.Done, ""}, {"a3", "A", execstore.Running, "a1"},
		{"b1", "B", execstore.Failed, ""}, {"b2", "B", execstore.Running, "b1"}, {"b3", "B", execstore.Done, ""},
		{"c1", "C", execstore.Suspended, ""}, {"c2", "C", execstore.Cancelled, "a1"}, {"c3", "C", execstore.Pending, ""},
		{"c4", "C", execstore.Running, ""}, {"a1", "A", execstore.Running, ""},
	}
	for _, r := range rows {
		e := &execstore.Execution{ID: r.id, DefinitionID: r.def, Status: r.status, ParentID: r.parent, Data: []byte("big snapshot")}
		require.NoError(t, s.Save(bg, e))
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
		{"status set with a repeat", execstore.ListQuery{Statuses: []execstore.Status{execstore.Done, execstore.Done}},
			func(r row) bool { return r.status == execstore.Done }},
		{"roots", execstore.ListQuery{RootsOnly: true}, func(r row) bool { return r.parent == "" }},
		{"roots+definition", execstore.ListQuery{RootsOnly: true, DefinitionID: "B"},
			func(r row) bool { return r.parent == "" && r.def == "B" }},
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
			assert.Equal(t, expect(c.keep), listAll(t, s, q), "%s limit %d", c.name, limit)
		}
	}
	page, err := s.List(bg, execstore.ListQuery{Limit: 2, DefinitionID: "B"})
	require.NoError(t, err)
	assert.Equal(t, []execstore.Summary{
		{ID: "b1", DefinitionID: "B", Status: execstore.Failed, Version: 1},
		{ID: "b2", DefinitionID: "B", Status: execstore.Running, ParentID: "b1", Version: 1},
	}, page.Items)
	assert.Equal(t, contract.EncodeCursor("b2"), page.NextCursor, "the cursor codec is the MongoDB store's")
	last, err := s.List(bg, execstore.ListQuery{Limit: 1, DefinitionID: "B", Cursor: page.NextCursor})
	require.NoError(t, err)
	assert.Equal(t, []string{"b3"}, []string{last.Items[0].ID})
	assert.Empty(t, last.NextCursor, "no further match: the last page says so")

	// A page that ends exactly at the last match has no next cursor.
	page, err = s.List(bg, execstore.ListQuery{Limit: 3, DefinitionID: "B"})
	require.NoError(t, err)
	assert.Len(t, page.Items, 3)
	assert.Empty(t, page.NextCursor)
	// An empty listing has an empty, non-nil page.
	page, err = s.List(bg, execstore.ListQuery{DefinitionID: "Z"})
	require.NoError(t, err)
	assert.NotNil(t, page.Items)
	assert.Empty(t, page.Items)
}

// A cursor resumes after the id it holds, whether or not that id is stored.
func TestListCursorAfterAnyID(t *testing.T) {
	s := memstore.New(memstore.Options{})
	for _, id := range []string{"a", "b", "d"} {
		require.NoError(t, s.Save(bg, newExe(id)))
	}
	page, err := s.List(bg, execstore.ListQuery{Cursor: contract.EncodeCursor("c")})
	require.NoError(t, err)
	assert.Equal(t, []execstore.Summary{{ID: "d", DefinitionID: "def", Status: execstore.Running, Version: 1}}, page.Items)
	page, err = s.List(bg, execstore.ListQuery{Cursor: contract.EncodeCursor("d")})
	require.NoError(t, err)
	assert.Empty(t, page.Items)
}

// Limit 0 is DefaultListLimit; MaxListLimit is allowed; ids sort bytewise, as MongoDB's _id.
func TestListLimits(t *testing.T) {
	s := memstore.New(memstore.Options{})
	n := execstore.DefaultListLimit + 5
	var ids []string
	for i := range n {
		id := fmt.Sprintf("e%03d", i)
		ids = append(ids, id)
		require.NoError(t, s.Save(bg, newExe(id)))
	}
	for _, id := range []string{"Z", "ä", "é", "~"} {
		ids = append(ids, id)
		require.NoError(t, s.Save(bg, newExe(id)))
	}
	sort.Strings(ids)
	page, err := s.List(bg, execstore.ListQuery{})
	require.NoError(t, err)
	assert.Len(t, page.Items, execstore.DefaultListLimit)
	assert.NotEmpty(t, page.NextCursor)
	page, err = s.List(bg, execstore.ListQuery{Limit: execstore.MaxListLimit})
	require.NoError(t, err)
	var got []string
	for _, sum := range page.Items {
		got = append(got, sum.ID)
	}
	assert.Equal(t, ids, got)
	assert.Empty(t, page.NextCursor)
	_, err = s.List(bg, execstore.ListQuery{Limit: execstore.MaxListLimit + 1})
	assert.ErrorIs(t, err, execstore.ErrInvalid)
}

// A garbage cursor is ErrInvalid, never a crash or a silent restart.
func TestListGarbageCursor(t *testing.T) {
	s := memstore.New(memstore.Options{})
	require.NoError(t, s.Save(bg, newExe("a")))
	for _, bad := range []string{"garbage", "!!!", "AQ", "Ag", "AGFiYw", "%%%", "\x00", contract.EncodeCursor("")} {
		_, err := s.List(bg, execstore.ListQuery{Cursor: bad})
		var ie *execstore.InvalidError
		if assert.ErrorAs(t, err, &ie, "cursor %q", bad) {
			assert.Equal(t, "ListQuery.Cursor", ie.Field)
		}
	}
}
