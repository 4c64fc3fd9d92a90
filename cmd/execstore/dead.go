package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
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

// deadReport is one page of dead items: what each was, how often and how it failed.
type deadReport struct {
	Items      []deadItem `json:"items"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// deadItem is one dead item as `dead` prints it.
type deadItem struct {
	Kind      string `json:"kind"`
	Execution string `json:"execution"`
	Seq       int64  `json:"seq,omitempty"`
	Path      string `json:"path,omitempty"`
	FireAt    string `json:"fire_at,omitempty"`
	Target    string `json:"target,omitempty"`
	ChildID   string `json:"child_id,omitempty"`
	EventSize int    `json:"event_bytes,omitempty"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error"`
	DeadAt    string `json:"dead_at"`
}

// listDead prints one page of dead items, as execstore.DeadLetters.ListDead returns them: one
// find of the executions that hold dead items, by _id.
func listDead(ctx context.Context, db *mongo.Database, w io.Writer, o deadOptions) error {
	q := execstore.DeadQuery{Kinds: o.Kinds, ExecutionID: o.ExecutionID, Limit: o.Limit, Cursor: o.Cursor}
	if err := contract.ValidateDeadQuery(&q); err != nil {
		return usagef("%v", err)
	}
	page, err := opsrun.ListDead(ctx, opsrun.Env{Executions: db.Collection(o.Collection)}, q)
	if err != nil {
		return fmt.Errorf("reading the dead items of %s.%s: %w", db.Name(), o.Collection, err)
	}
	r := &deadReport{Items: deadItems(page.Items), NextCursor: page.NextCursor}
	return emit(w, o.output, r)
}

// deadItems are items as `dead` prints them.
func deadItems(items []execstore.DeadItem) []deadItem {
	out := []deadItem{}
	for _, d := range items {
		it := deadItem{Kind: string(d.Kind), Execution: d.ExecutionID, Seq: d.Seq, Path: d.Path, Target: d.TargetID,
			ChildID: d.ChildID, EventSize: len(d.Event), Attempts: d.Count, LastError: d.LastError, DeadAt: formatTime(d.DeadAt)}
		if d.Kind == execstore.TimerItem {
			it.FireAt = formatTime(d.FireAt)
		}
		out = append(out, it)
	}
	return out
}

// deadOf reads the dead items of an executions document, in the listing's order.
func deadOf(doc bson.Raw) ([]deadItem, error) {
	id, _ := doc.Lookup("_id").StringValueOK()
	if _, err := doc.LookupErr(ops.FieldDead); err != nil {
		return nil, nil
	}
	page, err := opsrun.DeadOf(id, doc)
	if err != nil {
		return nil, err
	}
	if len(page) == 0 {
		return nil, nil
	}
	return deadItems(page), nil
}

func (r *deadReport) writeText(w io.Writer) error {
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
