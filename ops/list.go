package ops

import (
	"context"
	"encoding/base64"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// cursorVersion is the first byte of every list cursor, so a format change can be detected.
const cursorVersion = 1

// EncodeCursor returns the opaque cursor that resumes a listing after id.
func EncodeCursor(afterID string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{cursorVersion}, afterID...))
}

// DecodeCursor returns the id a cursor resumes after ("" for the empty cursor), or an
// ErrInvalid naming ListQuery.Cursor for anything EncodeCursor cannot have produced.
func DecodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(c)
	if err != nil || len(b) < 2 || b[0] != cursorVersion {
		return "", contract.Invalid("ListQuery.Cursor", "is not a cursor returned by List")
	}
	id := string(b[1:])
	// The decoder skips newlines and tolerates stray padding bits; only the canonical form
	// of a cursor is one.
	if contract.ValidateID("ListQuery.Cursor", id) != nil || EncodeCursor(id) != c {
		return "", contract.Invalid("ListQuery.Cursor", "is not a cursor returned by List")
	}
	return id, nil
}

// ListFilter builds the server-side filter of q resuming after afterID: every filter runs on
// the server (definition_id, status and parent_id are top-level fields), and paging is a
// keyset on _id, never a skip.
func ListFilter(q execstore.ListQuery, afterID string) bson.D {
	f := bson.D{}
	if afterID != "" {
		f = append(f, bson.E{Key: fID, Value: bson.D{{Key: "$gt", Value: afterID}}})
	}
	if q.DefinitionID != "" {
		f = append(f, bson.E{Key: fDefinition, Value: q.DefinitionID})
	}
	if len(q.Statuses) > 0 {
		in := make(bson.A, len(q.Statuses))
		for i, s := range q.Statuses {
			in[i] = string(s)
		}
		f = append(f, bson.E{Key: fStatus, Value: bson.D{{Key: "$in", Value: in}}})
	}
	if q.RootsOnly {
		f = append(f, bson.E{Key: fParent, Value: nil})
	}
	return f
}

var summaryProjection = bson.D{
	{Key: fDefinition, Value: 1},
	{Key: fStatus, Value: 1},
	{Key: fParent, Value: 1},
	{Key: fVersion, Value: 1},
}

// List returns one page of summaries. One find sorted by _id with limit+1, so the last page is
// known without another round trip.
func List(ctx context.Context, env Env, q execstore.ListQuery) (execstore.Page, error) {
	after, err := DecodeCursor(q.Cursor)
	if err != nil {
		return execstore.Page{}, err
	}
	limit := q.Limit
	if limit == 0 {
		limit = execstore.DefaultListLimit
	}
	cur, err := env.Executions.Find(ctx, ListFilter(q, after), options.Find().
		SetProjection(summaryProjection).
		SetSort(bson.D{{Key: fID, Value: 1}}).
		SetLimit(int64(limit)+1))
	if err != nil {
		return execstore.Page{}, readFailure("list", "", err)
	}
	var docs []execDoc
	if err := cur.All(ctx, &docs); err != nil {
		return execstore.Page{}, readFailure("list", "", err)
	}
	page := execstore.Page{}
	if len(docs) > limit {
		docs = docs[:limit]
		page.NextCursor = EncodeCursor(docs[limit-1].ID)
	}
	page.Items = make([]execstore.Summary, len(docs))
	for i, d := range docs {
		page.Items[i] = execstore.Summary{ID: d.ID, DefinitionID: d.DefinitionID,
			Status: execstore.Status(d.Status), ParentID: deref(d.ParentID), Version: d.Version}
	}
	return page, nil
}
