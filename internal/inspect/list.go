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
	// After is a cursor a page of the same Sort and Desc returned, "" from the start. In id
	// order it may also be an execution id.
	After string
	Sort  ListSort // the order of the page; "" is SortByID
	Desc  bool     // descending rather than ascending
}

// ExecutionPage is one page of executions.
type ExecutionPage struct {
	Items []ExecutionSummary `json:"items"`
	// NextCursor resumes the listing (ListQuery.After); absent on the last page. In
	// ascending id order it is the cursor execstore.Store.List returns too.
	NextCursor string `json:"next_cursor,omitempty"`
}

// ExecutionSummary is one execution in a listing.
type ExecutionSummary struct {
	ID         string `json:"id"`
	Definition string `json:"definition,omitempty"`
	Status     string `json:"status"`
	Parent     string `json:"parent,omitempty"` // absent for a root
	Version    int64  `json:"version"`
	// CreatedAt and UpdatedAt are when the commit that created the execution and its last
	// commit were made (ops.FieldCreatedAt, ops.FieldUpdatedAt), as FormatTime writes them;
	// absent from a document written before the store stamped them (UpdatedAt until its next
	// commit, CreatedAt for good).
	CreatedAt string `json:"created_at,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
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
// that the stores' List uses, so the indexes ops.Indexes creates serve it, and in created or
// updated order the keyset on (that time, _id). No index leads with the parent: a filter on
// it alone reads the collection, bounded by the page's limit.
func listFilter(q ListQuery) (bson.D, error) {
	f := bson.D{}
	switch {
	case q.Sort.byTime():
		if q.After != "" {
			k, err := decodeKeyset(q.After, q.Sort, q.Desc)
			if err != nil {
				return nil, err
			}
			f = append(f, k.after(q.Sort.field(), q.Desc))
		}
	case AfterID(q.After) != "":
		op := "$gt"
		if q.Desc {
			op = "$lt"
		}
		f = append(f, bson.E{Key: idField, Value: bson.D{{Key: op, Value: AfterID(q.After)}}})
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
	return f, nil
}

// ListExecutions reads one page of the executions collection coll: one find sorted by q's
// order, limit+1 so that the last page is known without another round trip. In id order
// the _id index, or the index of the definition or the status, serves it; in created or
// updated order the server sorts what the filter selects (no index leads with either time:
// docs/ui.md says why), and a listing with no filter but its cursor first samples the
// collection to sort less of it (listbound.go). A cursor of another order is a *QueryError.
func ListExecutions(ctx context.Context, coll *mongo.Collection, q ListQuery) (*ExecutionPage, error) {
	return listExecutions(ctx, coll, q, listSampleSize)
}

// listExecutions is ListExecutions, sampling sample executions for a bound.
func listExecutions(ctx context.Context, coll *mongo.Collection, q ListQuery, sample int) (*ExecutionPage, error) {
	filter, err := listFilter(q)
	if err != nil {
		return nil, err
	}
	if bounded(q) {
		bound, ok, err := sampledBound(ctx, coll, q, sample)
		if err != nil {
			return nil, err
		}
		if ok {
			page, full, err := findPage(ctx, coll, append(filter, bound), q)
			if err != nil || full {
				return page, err
			}
		}
	}
	page, _, err := findPage(ctx, coll, filter, q)
	return page, err
}

// findPage runs the find of q's page over filter, and reports whether it found more than
// the page (so that a next page exists).
func findPage(ctx context.Context, coll *mongo.Collection, filter bson.D, q ListQuery) (*ExecutionPage, bool, error) {
	dir := 1
	if q.Desc {
		dir = -1
	}
	sort := bson.D{{Key: idField, Value: dir}}
	if q.Sort.byTime() {
		sort = bson.D{{Key: q.Sort.field(), Value: dir}, {Key: idField, Value: dir}}
	}
	cur, err := coll.Find(ctx, filter, options.Find().
		SetProjection(bson.D{{Key: ops.FieldDefinitionID, Value: 1}, {Key: ops.FieldStatus, Value: 1},
			{Key: ops.FieldParentID, Value: 1}, {Key: ops.FieldVersion, Value: 1},
			{Key: ops.FieldCreatedAt, Value: 1}, {Key: ops.FieldUpdatedAt, Value: 1}}).
		SetSort(sort).
		SetLimit(int64(q.Limit)+1))
	if err != nil {
		return nil, false, fmt.Errorf("listing %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &ExecutionPage{Items: []ExecutionSummary{}}
	var keys []keyset // each item's place in q's order
	for cur.Next(ctx) {
		d := cur.Current
		k := keyset{ID: str(d, idField)}
		if ms, ok := d.Lookup(q.Sort.field()).DateTimeOK(); ok && q.Sort.byTime() {
			k.At = &ms
		}
		keys = append(keys, k)
		r.Items = append(r.Items, ExecutionSummary{ID: k.ID, Definition: str(d, ops.FieldDefinitionID),
			Status: str(d, ops.FieldStatus), Parent: str(d, ops.FieldParentID), Version: integer(d, ops.FieldVersion),
			CreatedAt: dateOf(d, ops.FieldCreatedAt), UpdatedAt: dateOf(d, ops.FieldUpdatedAt)})
	}
	if err := cur.Err(); err != nil {
		return nil, false, fmt.Errorf("listing %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	full := len(r.Items) > q.Limit
	if full {
		r.Items = r.Items[:q.Limit]
		last := keys[q.Limit-1]
		if q.Sort.byTime() {
			r.NextCursor = last.encode(q.Sort, q.Desc)
		} else {
			r.NextCursor = contract.EncodeCursor(last.ID)
		}
	}
	return r, full, nil
}
