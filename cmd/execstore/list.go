package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

// listOptions select the executions `list` prints.
type listOptions struct {
	output
	Collection string
	Statuses   []execstore.Status // any of them; none for any status
	Definition string             // "" for any definition
	Roots      bool               // only executions without a parent
	Limit      int                // page size, 1 to contract.MaxListLimit
	After      string             // a cursor `list` printed, or an execution id; "" from the start
}

// listReport is one page of executions.
type listReport struct {
	Items []summary `json:"items"`
	// NextCursor resumes the listing (-after); absent on the last page. It is the cursor
	// execstore.Store.List returns too.
	NextCursor string `json:"next_cursor,omitempty"`
}

// summary is one execution in a listing.
type summary struct {
	ID         string `json:"id"`
	Definition string `json:"definition,omitempty"`
	Status     string `json:"status"`
	Parent     string `json:"parent,omitempty"` // absent for a root
	Version    int64  `json:"version"`
}

// afterID is where a listing resumes: the id a cursor names, or the value itself taken as
// an execution id when it is not a cursor.
func afterID(after string) string {
	if id, err := contract.DecodeCursor(after); err == nil {
		return id
	}
	return after
}

// listFilter is the server-side filter of o: the same top-level fields and keyset on _id
// that the stores' List uses, so the indexes ops.Indexes creates serve it.
func listFilter(o listOptions) bson.D {
	f := bson.D{}
	if id := afterID(o.After); id != "" {
		f = append(f, bson.E{Key: idField, Value: bson.D{{Key: "$gt", Value: id}}})
	}
	if o.Definition != "" {
		f = append(f, bson.E{Key: ops.FieldDefinitionID, Value: o.Definition})
	}
	if len(o.Statuses) > 0 {
		in := bson.A{}
		for _, s := range o.Statuses {
			in = append(in, string(s))
		}
		f = append(f, bson.E{Key: ops.FieldStatus, Value: bson.D{{Key: "$in", Value: in}}})
	}
	if o.Roots {
		f = append(f, bson.E{Key: ops.FieldParentID, Value: nil})
	}
	return f
}

// listExecutions prints one page: one find sorted by _id, limit+1 so that the last page is
// known without another round trip.
func listExecutions(ctx context.Context, db *mongo.Database, w io.Writer, o listOptions) error {
	coll := db.Collection(o.Collection)
	cur, err := coll.Find(ctx, listFilter(o), options.Find().
		SetProjection(bson.D{{Key: ops.FieldDefinitionID, Value: 1}, {Key: ops.FieldStatus, Value: 1},
			{Key: ops.FieldParentID, Value: 1}, {Key: ops.FieldVersion, Value: 1}}).
		SetSort(bson.D{{Key: idField, Value: 1}}).
		SetLimit(int64(o.Limit)+1))
	if err != nil {
		return fmt.Errorf("listing %s.%s: %w", db.Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &listReport{Items: []summary{}}
	for cur.Next(ctx) {
		d := cur.Current
		r.Items = append(r.Items, summary{ID: str(d, idField), Definition: str(d, ops.FieldDefinitionID),
			Status: str(d, ops.FieldStatus), Parent: str(d, ops.FieldParentID), Version: integer(d, ops.FieldVersion)})
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("listing %s.%s: %w", db.Name(), coll.Name(), err)
	}
	if len(r.Items) > o.Limit {
		r.Items = r.Items[:o.Limit]
		r.NextCursor = contract.EncodeCursor(r.Items[o.Limit-1].ID)
	}
	return emit(w, o.output, r)
}

func (r *listReport) writeText(w io.Writer) error {
	if len(r.Items) == 0 {
		_, err := fmt.Fprintln(w, "no executions")
		return err
	}
	rows := make([][]string, len(r.Items))
	for i, s := range r.Items {
		rows[i] = []string{plain(s.ID), orDash(s.Definition), orDash(s.Status), orDash(s.Parent), strconv.FormatInt(s.Version, 10)}
	}
	if err := table(w, "", []string{"ID", "DEFINITION", "STATUS", "PARENT", "VERSION"}, rows); err != nil {
		return err
	}
	next := "last page"
	if r.NextCursor != "" {
		next = "next page: -after " + r.NextCursor
	}
	_, err := fmt.Fprintf(w, "\n%s; %s\n", plural(len(r.Items), "execution", "executions"), next)
	return err
}
