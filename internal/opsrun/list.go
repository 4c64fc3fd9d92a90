package opsrun

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/ops"
)

// listFilter builds the server-side filter of q resuming after afterID: every filter runs on
// the server (definition_id, status and parent_id are top-level fields), and paging is a
// keyset on _id, never a skip.
func listFilter(q execstore.ListQuery, afterID string) bson.D {
	f := bson.D{}
	if afterID != "" {
		f = append(f, bson.E{Key: fID, Value: bson.D{{Key: "$gt", Value: afterID}}})
	}
	if q.DefinitionID != "" {
		f = append(f, bson.E{Key: ops.FieldDefinitionID, Value: q.DefinitionID})
	}
	if len(q.Statuses) > 0 {
		in := make(bson.A, len(q.Statuses))
		for i, s := range q.Statuses {
			in[i] = string(s)
		}
		f = append(f, bson.E{Key: ops.FieldStatus, Value: bson.D{{Key: "$in", Value: in}}})
	}
	if q.RootsOnly {
		f = append(f, bson.E{Key: ops.FieldParentID, Value: nil})
	}
	return f
}

var summaryProjection = bson.D{
	{Key: ops.FieldDefinitionID, Value: 1},
	{Key: ops.FieldStatus, Value: 1},
	{Key: ops.FieldParentID, Value: 1},
	{Key: ops.FieldVersion, Value: 1},
}

// List returns one page of summaries. One find sorted by _id with limit+1, so the last page is
// known without another round trip.
func List(ctx context.Context, env Env, q execstore.ListQuery) (execstore.Page, error) {
	after, limit, err := contract.ListPage(q)
	if err != nil {
		return execstore.Page{}, err
	}
	cur, err := env.Executions.Find(ctx, listFilter(q, after), options.Find().
		SetProjection(summaryProjection).
		SetSort(bson.D{{Key: fID, Value: 1}}).
		SetLimit(int64(limit)+1))
	if err != nil {
		return execstore.Page{}, outcome.ReadFailure("list", "", err)
	}
	var docs []execDoc
	if err := cur.All(ctx, &docs); err != nil {
		return execstore.Page{}, outcome.ReadFailure("list", "", err)
	}
	page := execstore.Page{}
	if len(docs) > limit {
		docs = docs[:limit]
		page.NextCursor = contract.EncodeCursor(docs[limit-1].ID)
	}
	page.Items = make([]execstore.Summary, len(docs))
	for i, d := range docs {
		page.Items[i] = execstore.Summary{ID: d.ID, DefinitionID: d.DefinitionID,
			Status: execstore.Status(d.Status), ParentID: deref(d.ParentID), Version: d.Version}
	}
	return page, nil
}
