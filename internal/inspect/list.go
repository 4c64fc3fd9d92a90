package inspect

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

// ListQuery selects a page of executions.
type ListQuery struct {
	Statuses   []execstore.Status // any of them; none for any status
	Definition string             // "" for any definition
	Parent     string             // only the children of this execution; "" for any
	Roots      bool               // only executions without a parent
	Limit      int                // page size, 1 to contract.MaxListLimit
	After      string             // a cursor a page returned, or an execution id; "" from the start
}

// ExecutionPage is one page of executions.
type ExecutionPage struct {
	Items []ExecutionSummary `json:"items"`
	// NextCursor resumes the listing (ListQuery.After); absent on the last page. It is the
	// cursor execstore.Store.List returns too.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ExecutionSummary is one execution in a listing.
type ExecutionSummary struct {
	ID         string `json:"id"`
	Definition string `json:"definition,omitempty"`
	Status     string `json:"status"`
	Parent     string `json:"parent,omitempty"` // absent for a root
	Version    int64  `json:"version"`
}

// AfterID is where a listing resumes: the id a cursor names, or the value itself taken as
// an id when it is not a cursor.
func AfterID(after string) string {
	if id, err := contract.DecodeCursor(after); err == nil {
		return id
	}
	return after
}

// listFilter is the server-side filter of q: the same top-level fields and keyset on _id
// that the stores' List uses, so the indexes ops.Indexes creates serve it. No index leads
// with the parent: a filter on it alone reads the collection, bounded by the page's limit.
func listFilter(q ListQuery) bson.D {
	f := bson.D{}
	if id := AfterID(q.After); id != "" {
		f = append(f, bson.E{Key: idField, Value: bson.D{{Key: "$gt", Value: id}}})
	}
	if q.Definition != "" {
		f = append(f, bson.E{Key: ops.FieldDefinitionID, Value: q.Definition})
	}
	if len(q.Statuses) > 0 {
		in := bson.A{}
		for _, s := range q.Statuses {
			in = append(in, string(s))
		}
		f = append(f, bson.E{Key: ops.FieldStatus, Value: bson.D{{Key: "$in", Value: in}}})
	}
	switch {
	case q.Roots:
		f = append(f, bson.E{Key: ops.FieldParentID, Value: nil})
	case q.Parent != "":
		f = append(f, bson.E{Key: ops.FieldParentID, Value: q.Parent})
	}
	return f
}

// ListExecutions reads one page of the executions collection coll: one find sorted by _id,
// limit+1 so that the last page is known without another round trip.
func ListExecutions(ctx context.Context, coll *mongo.Collection, q ListQuery) (*ExecutionPage, error) {
	cur, err := coll.Find(ctx, listFilter(q), options.Find().
		SetProjection(bson.D{{Key: ops.FieldDefinitionID, Value: 1}, {Key: ops.FieldStatus, Value: 1},
			{Key: ops.FieldParentID, Value: 1}, {Key: ops.FieldVersion, Value: 1}}).
		SetSort(bson.D{{Key: idField, Value: 1}}).
		SetLimit(int64(q.Limit)+1))
	if err != nil {
		return nil, fmt.Errorf("listing %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &ExecutionPage{Items: []ExecutionSummary{}}
	for cur.Next(ctx) {
		d := cur.Current
		r.Items = append(r.Items, ExecutionSummary{ID: str(d, idField), Definition: str(d, ops.FieldDefinitionID),
			Status: str(d, ops.FieldStatus), Parent: str(d, ops.FieldParentID), Version: integer(d, ops.FieldVersion)})
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("listing %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	if len(r.Items) > q.Limit {
		r.Items = r.Items[:q.Limit]
		r.NextCursor = contract.EncodeCursor(r.Items[q.Limit-1].ID)
	}
	return r, nil
}
