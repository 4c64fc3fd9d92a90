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

// Pages beyond what the conformance suite checks: a repeated status, roots with a definition,
// the cursor is contract.EncodeCursor of the last id, a page that ends at the last match has no
// cursor, and an empty listing is an empty, non-nil page of summaries.
func TestListing(t *testing.T) {
	s := memstore.New(memstore.Options{})
	for _, e := range []*execstore.Execution{
		{ID: "b3", DefinitionID: "B", Status: execstore.Done},
		{ID: "b1", DefinitionID: "B", Status: execstore.Failed},
		{ID: "x", DefinitionID: "X", Status: execstore.Done, ParentID: "b1"},
		{ID: "b2", DefinitionID: "B", Status: execstore.Running, ParentID: "b1", Data: []byte("big snapshot")},
		{ID: "a", DefinitionID: "A", Status: execstore.Done},
	} {
		require.NoError(t, s.Save(bg, e))
	}
	for _, c := range []struct {
		q    execstore.ListQuery
		want []string
	}{
		{execstore.ListQuery{Statuses: []execstore.Status{execstore.Done, execstore.Done}}, []string{"a", "b3", "x"}},
		{execstore.ListQuery{RootsOnly: true, DefinitionID: "B"}, []string{"b1", "b3"}},
		{execstore.ListQuery{RootsOnly: true, Statuses: []execstore.Status{execstore.Done}}, []string{"a", "b3"}},
		{execstore.ListQuery{DefinitionID: "X", Statuses: []execstore.Status{execstore.Running}}, nil},
	} {
		for _, limit := range []int{0, 1, 2} {
			q := c.q
			q.Limit = limit
			assert.Equal(t, c.want, listAll(t, s, q), "%+v", q)
		}
	}

	page, err := s.List(bg, execstore.ListQuery{Limit: 2, DefinitionID: "B"})
	require.NoError(t, err)
	assert.Equal(t, []execstore.Summary{
		{ID: "b1", DefinitionID: "B", Status: execstore.Failed, Version: 1},
		{ID: "b2", DefinitionID: "B", Status: execstore.Running, ParentID: "b1", Version: 1},
	}, page.Items)
	assert.Equal(t, contract.EncodeCursor("b2"), page.NextCursor, "the cursor codec is the MongoDB store's")
	page, err = s.List(bg, execstore.ListQuery{Limit: 3, DefinitionID: "B"})
	require.NoError(t, err)
	assert.Len(t, page.Items, 3)
	assert.Empty(t, page.NextCursor, "no further match: the last page says so")
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
	n := contract.DefaultListLimit + 5
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
	assert.Len(t, page.Items, contract.DefaultListLimit)
	assert.NotEmpty(t, page.NextCursor)
	page, err = s.List(bg, execstore.ListQuery{Limit: contract.MaxListLimit})
	require.NoError(t, err)
	var got []string
	for _, sum := range page.Items {
		got = append(got, sum.ID)
	}
	assert.Equal(t, ids, got)
	assert.Empty(t, page.NextCursor)
	_, err = s.List(bg, execstore.ListQuery{Limit: contract.MaxListLimit + 1})
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
