package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/inspect"
)

// deadOptions select the dead items `dead` prints.
type deadOptions struct {
	output
	Collection  string
	Kinds       []execstore.ItemKind
	ExecutionID string
	Limit       int
	Cursor      string
}

// listDead prints one page of dead items, as execstore.DeadLetters.ListDead returns them: one
// find of the executions that hold dead items, by _id.
func listDead(ctx context.Context, db *mongo.Database, w io.Writer, o deadOptions) error {
	q := execstore.DeadQuery{Kinds: o.Kinds, ExecutionID: o.ExecutionID, Limit: o.Limit, Cursor: o.Cursor}
	if err := inspect.ValidateDeadQuery(&q); err != nil {
		return usagef("%v", err)
	}
	r, err := inspect.ListDead(ctx, db.Collection(o.Collection), q)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeDead)
}

// writeDead writes a page of dead items for people.
func writeDead(w io.Writer, r *inspect.DeadPage) error {
	if len(r.Items) == 0 {
		_, err := fmt.Fprintln(w, "dead: none")
		return err
	}
	fmt.Fprintf(w, "dead: %s\n", plural(len(r.Items), "item", "items"))
	for _, d := range r.Items {
		var what string
		switch execstore.ItemKind(d.Kind) {
		case execstore.OutboxItem:
			what = fmt.Sprintf("outbox %s/%d to %q (%d bytes)", d.Execution, d.Seq, d.Target, d.EventSize)
		case execstore.SpawnItem:
			what = fmt.Sprintf("spawn %s/%d of child %q", d.Execution, d.Seq, d.ChildID)
		default:
			what = fmt.Sprintf("timer %s %q at %s", d.Execution, d.Path, d.FireAt)
		}
		fmt.Fprintf(w, "  %s: %s, dead at %s: %s\n", what, plural(d.Attempts, "attempt", "attempts"), d.DeadAt,
			strings.ReplaceAll(d.LastError, "\n", " "))
	}
	if r.NextCursor != "" {
		fmt.Fprintf(w, "more: -cursor %s\n", r.NextCursor)
	}
	return nil
}

// parseKinds reads -kind's comma-separated list.
func parseKinds(s string) []execstore.ItemKind {
	var out []execstore.ItemKind
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, execstore.ItemKind(k))
		}
	}
	return out
}
