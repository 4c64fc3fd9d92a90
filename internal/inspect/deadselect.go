package inspect

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
)

// DeadFilter selects dead items for a listing or an action. Its fields AND together; the zero
// DeadFilter selects every dead item.
type DeadFilter struct {
	Kinds       []execstore.ItemKind // any of these; none for every kind
	ExecutionID string               // "" for every execution
	Definition  string               // only the items of executions of this definition
	// ErrorContains keeps the items whose last error contains it, ignoring case.
	ErrorContains string
	// DeadBefore keeps the items that died at or before it (by their reporter's clock): an
	// age, now minus "older than". Zero for any age.
	DeadBefore time.Time
	// Limit is how many of the newest items to return: 0 means 100, at most MaxDeadSelected.
	Limit int
}

// MaxDeadSelected bounds what one listing returns and one action acts on.
const MaxDeadSelected = 10_000

// MaxDeadDocuments bounds the executions holding dead items one selection reads: the items
// are ordered by when they died, which no index holds, so every selected execution is read.
// A selection that stops there says so (DeadSelection.Truncated).
const MaxDeadDocuments = 20_000

// ParseKinds reads a comma-separated list of item kinds, as -kind and ?kind= give it; the
// kinds are checked by ValidateDeadFilter.
func ParseKinds(s string) []execstore.ItemKind {
	var out []execstore.ItemKind
	for _, k := range strings.Split(s, ",") {
		if k = strings.TrimSpace(k); k != "" {
			out = append(out, execstore.ItemKind(k))
		}
	}
	return out
}

// Empty reports whether f selects every dead item: no kind, execution, definition, error
// text or age.
func (f DeadFilter) Empty() bool {
	return len(f.Kinds) == 0 && f.ExecutionID == "" && f.Definition == "" && f.ErrorContains == "" && f.DeadBefore.IsZero()
}

// ValidateDeadFilter checks f and sets its default limit.
func ValidateDeadFilter(f *DeadFilter) error {
	for _, k := range f.Kinds {
		switch k {
		case execstore.OutboxItem, execstore.SpawnItem, execstore.TimerItem:
		default:
			return contract.Invalid("kind", "is %q, not one of %q, %q, %q", k, execstore.OutboxItem, execstore.SpawnItem, execstore.TimerItem)
		}
	}
	if f.ExecutionID != "" {
		if err := contract.ValidateID("execution", f.ExecutionID); err != nil {
			return err
		}
	}
	switch {
	case f.Limit < 0 || f.Limit > MaxDeadSelected:
		return contract.Invalid("limit", "is %d, not within 0 to %d", f.Limit, MaxDeadSelected)
	case f.Limit == 0:
		f.Limit = 100
	}
	return nil
}

// DeadSelection is the dead items a DeadFilter selected, newest first, and the same items
// grouped by their last error.
type DeadSelection struct {
	Items []SelectedDead `json:"items"`
	// Matched is how many items the filter selected; Items holds the newest Limit of them.
	Matched int `json:"matched"`
	// Truncated is set when more than MaxDeadDocuments executions hold dead items the
	// filter may select: only the first of them, by id, were read. Narrow the filter.
	Truncated bool `json:"truncated,omitempty"`
	// Groups are Items by last error, the group with the newest item first.
	Groups []DeadGroup `json:"groups"`
}

// SelectedDead is one dead item of a selection: what DeadItem shows, the execution's
// definition, and the event's type or first bytes.
type SelectedDead struct {
	DeadItem
	// Ref names the item as the execstore CLI writes it (execstore.ItemRef's String).
	Ref        string `json:"ref"`
	Definition string `json:"definition,omitempty"`
	// EventType is an outbox event's "type" field, when it is a JSON or BSON object with a
	// string there.
	EventType string `json:"event_type,omitempty"`
	// EventStart is an outbox event's first bytes, as the outbox listing previews an event;
	// package ui shows it only when bodies are asked for.
	EventStart string `json:"event_start,omitempty"`

	ref    execstore.ItemRef
	deadAt time.Time
}

// ItemRef is the item's name, for an action.
func (d SelectedDead) ItemRef() execstore.ItemRef { return d.ref }

// DeadGroup is the selected items that failed with one last error.
type DeadGroup struct {
	Error  string `json:"error"`
	Count  int    `json:"count"`
	Newest string `json:"newest"` // the dead_at of the newest
	// Items are the indexes of the group's items in DeadSelection.Items, newest first.
	Items []int `json:"items"`
}

// SelectDead reads the dead items f selects (f must be valid: ValidateDeadFilter), newest
// first: one find of the executions that hold dead items (of f's execution or definition
// when given), projecting their dead items and definition, reading at most
// MaxDeadDocuments of them.
func SelectDead(ctx context.Context, coll *mongo.Collection, f DeadFilter) (*DeadSelection, error) {
	filter := ops.DeadItemsFilter()
	if f.ExecutionID != "" {
		filter = append(filter, bson.E{Key: idField, Value: f.ExecutionID})
	}
	if f.Definition != "" {
		filter = append(filter, bson.E{Key: ops.FieldDefinitionID, Value: f.Definition})
	}
	cur, err := coll.Find(ctx, filter, options.Find().SetProjection(bson.D{{Key: ops.FieldDead, Value: 1}, {Key: ops.FieldDefinitionID, Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("reading the dead items of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	sel := &DeadSelection{Items: []SelectedDead{}, Groups: []DeadGroup{}}
	all := []SelectedDead{}
	docs := 0
	for cur.Next(ctx) {
		if docs == MaxDeadDocuments {
			sel.Truncated = true
			break
		}
		docs++
		id, _ := cur.Current.Lookup(idField).StringValueOK()
		items, err := opsrun.DeadOf(id, cur.Current)
		if err != nil {
			continue // not written by this store
		}
		def := str(cur.Current, ops.FieldDefinitionID)
		for _, d := range items {
			if f.keeps(d) {
				all = append(all, selected(d, def))
			}
		}
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("reading the dead items of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	slices.SortStableFunc(all, func(a, b SelectedDead) int {
		if c := b.deadAt.Compare(a.deadAt); c != 0 {
			return c
		}
		return contract.KeyOf(a.ref).Compare(contract.KeyOf(b.ref))
	})
	sel.Matched = len(all)
	sel.Items = all[:min(len(all), f.Limit)]
	sel.Groups = groupByError(sel.Items)
	return sel, nil
}

// keeps reports whether f selects the dead item d of an execution it read.
func (f DeadFilter) keeps(d execstore.DeadItem) bool {
	if len(f.Kinds) > 0 && !slices.Contains(f.Kinds, d.Kind) {
		return false
	}
	if !f.DeadBefore.IsZero() && d.DeadAt.After(f.DeadBefore) {
		return false
	}
	return f.ErrorContains == "" || strings.Contains(strings.ToLower(d.LastError), strings.ToLower(f.ErrorContains))
}

// selected is d as a selection shows it.
func selected(d execstore.DeadItem, definition string) SelectedDead {
	s := SelectedDead{DeadItem: deadItems([]execstore.DeadItem{d})[0], Ref: d.ItemRef.String(), Definition: definition,
		ref: d.ItemRef, deadAt: d.DeadAt}
	if d.Kind == execstore.OutboxItem {
		s.EventType, s.EventStart = EventType(d.Event), previewPayload(d.Event).Line()
	}
	return s
}

// groupByError groups items (newest first) by their last error, the group with the newest
// item first.
func groupByError(items []SelectedDead) []DeadGroup {
	out := []DeadGroup{}
	at := map[string]int{}
	for i, it := range items {
		g, ok := at[it.LastError]
		if !ok {
			g = len(out)
			at[it.LastError] = g
			out = append(out, DeadGroup{Error: it.LastError, Newest: it.DeadAt})
		}
		out[g].Count++
		out[g].Items = append(out[g].Items, i)
	}
	return out
}

// EventType is the string under "type" when b is a JSON or BSON object that has one, cut
// to 48 runes; else "".
func EventType(b []byte) string {
	switch classify(b) {
	case kindJSON:
		var obj struct {
			Type any `json:"type"`
		}
		if json.Unmarshal(b, &obj) == nil {
			if s, ok := obj.Type.(string); ok && s != "" {
				return cutRunes(s, previewRunes)
			}
		}
	case kindBSON:
		if s, ok := bson.Raw(b).Lookup("type").StringValueOK(); ok && s != "" {
			return cutRunes(s, previewRunes)
		}
	}
	return ""
}

// cutRunes is s cut to n runes, with "…" when it was longer.
func cutRunes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n]) + "…"
}
