package inspect

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
)

// DeadPage is one page of dead items: what each was, how often and how it failed.
type DeadPage struct {
	Items      []DeadItem `json:"items"`
	NextCursor string     `json:"next_cursor,omitempty"`
}

// DeadItem is one dead item.
type DeadItem struct {
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

// ValidateDeadQuery checks q and sets its defaults, as execstore.DeadLetters.ListDead does.
func ValidateDeadQuery(q *execstore.DeadQuery) error { return contract.ValidateDeadQuery(q) }

// ListDead reads one page of the dead items of the executions collection coll, as
// execstore.DeadLetters.ListDead returns them: one find of the executions that hold dead
// items, by _id. q must be valid (ValidateDeadQuery).
func ListDead(ctx context.Context, coll *mongo.Collection, q execstore.DeadQuery) (*DeadPage, error) {
	page, err := opsrun.ListDead(ctx, opsrun.Env{Executions: coll}, q)
	if err != nil {
		return nil, fmt.Errorf("reading the dead items of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	return &DeadPage{Items: deadItems(page.Items), NextCursor: page.NextCursor}, nil
}

// deadItems are items as the reports show them.
func deadItems(items []execstore.DeadItem) []DeadItem {
	out := []DeadItem{}
	for _, d := range items {
		it := DeadItem{Kind: string(d.Kind), Execution: d.ExecutionID, Seq: d.Seq, Path: d.Path, Target: d.TargetID,
			ChildID: d.ChildID, EventSize: len(d.Event), Attempts: d.Count, LastError: d.LastError, DeadAt: FormatTime(d.DeadAt)}
		if d.Kind == execstore.TimerItem {
			it.FireAt = FormatTime(d.FireAt)
		}
		out = append(out, it)
	}
	return out
}

// deadOf reads the dead items of an executions document, in the listing's order.
func deadOf(doc bson.Raw) ([]DeadItem, error) {
	id, _ := doc.Lookup(idField).StringValueOK()
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
