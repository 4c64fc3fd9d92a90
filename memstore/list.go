package memstore

import (
	"context"
	"slices"
	"sort"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// List returns one page of summaries matching q, ordered by id (see execstore.Store). The
// cursor encodes the id the page resumes after, as the MongoDB store's does. List steps over
// the store's executions from the cursor on until the page is full.
func (s *Store) List(ctx context.Context, q execstore.ListQuery) (execstore.Page, error) {
	if err := contract.ValidateListQuery(&q); err != nil {
		return execstore.Page{}, err
	}
	after, limit, err := contract.ListPage(q)
	if err != nil {
		return execstore.Page{}, err
	}
	if err := s.rlock(ctx); err != nil {
		return execstore.Page{}, err
	}
	defer s.mu.RUnlock()
	page := execstore.Page{Items: []execstore.Summary{}}
	for i := sort.Search(len(s.ids), func(i int) bool { return s.ids[i] > after }); i < len(s.ids); i++ {
		exe := &s.execs[s.ids[i]].exe
		if !matches(&q, exe) {
			continue
		}
		if len(page.Items) == limit {
			page.NextCursor = contract.EncodeCursor(page.Items[limit-1].ID)
			break
		}
		page.Items = append(page.Items, execstore.Summary{ID: exe.ID, DefinitionID: exe.DefinitionID,
			Status: exe.Status, ParentID: exe.ParentID, Version: exe.Version})
	}
	return page, nil
}

// matches reports whether exe passes q's filters, which AND together; the statuses are a set.
func matches(q *execstore.ListQuery, exe *execstore.Execution) bool {
	return (q.DefinitionID == "" || exe.DefinitionID == q.DefinitionID) &&
		(len(q.Statuses) == 0 || slices.Contains(q.Statuses, exe.Status)) &&
		(!q.RootsOnly || exe.ParentID == "")
}
