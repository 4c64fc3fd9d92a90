package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/inspect"
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
	Sort       inspect.ListSort   // id (the default), created or updated
	Desc       bool               // descending
}

// listExecutions prints one page: one find in the order asked, limit+1 so that the last page
// is known without another round trip.
func listExecutions(ctx context.Context, db *mongo.Database, w io.Writer, o listOptions) error {
	q := inspect.ListQuery{Statuses: o.Statuses, Definition: o.Definition, Roots: o.Roots, Limit: o.Limit, After: o.After,
		Sort: o.Sort, Desc: o.Desc}
	r, err := inspect.ListExecutions(ctx, db.Collection(o.Collection), q)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeList)
}

// writeList writes one page of executions for people.
func writeList(w io.Writer, r *inspect.ExecutionPage) error {
	if len(r.Items) == 0 {
		_, err := fmt.Fprintln(w, "no executions")
		return err
	}
	rows := make([][]string, len(r.Items))
	for i, s := range r.Items {
		rows[i] = []string{plain(s.ID), orDash(s.Definition), orDash(s.Status), orDash(s.Parent), strconv.FormatInt(s.Version, 10),
			orDash(s.CreatedAt), orDash(s.UpdatedAt)}
	}
	if err := table(w, "", []string{"ID", "DEFINITION", "STATUS", "PARENT", "VERSION", "CREATED", "UPDATED"}, rows); err != nil {
		return err
	}
	next := "last page"
	if r.NextCursor != "" {
		next = "next page: -after " + r.NextCursor
	}
	_, err := fmt.Fprintf(w, "\n%s; %s\n", plural(len(r.Items), "execution", "executions"), next)
	return err
}
