package inspect

import (
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
)

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
