package inspect

import (
	"cmp"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
)

// Reading an executions document through the public model of package ops: its field names
// (ops.Field…), its entries (ops.OutboxDoc, ops.SpawnDoc, ops.TraceDoc), its timer keys
// (ops.DecodeKey) and the fields of its dedupe set (ops.Layout.DedupeFields, under any
// window). Both stored shapes of the trace are read (an array on MongoDB, a sub-document
// keyed by index on FerretDB), so a database reads the same whichever server wrote it.

// idField is every document's _id.
const idField = "_id"

// dedupeFields are the fields that may hold an execution's dedupe set: the one of a store
// without a window, then the two generations of a store with one.
func dedupeFields() []string {
	fields := ops.Layout{}.DedupeFields()
	for _, f := range (ops.Layout{DedupeWindow: 1}).DedupeFields() {
		if !slices.Contains(fields, f) {
			fields = append(fields, f)
		}
	}
	return fields
}

// OutboxEntry is one pending outbox entry.
type OutboxEntry struct {
	Seq     int64   `json:"seq"`
	Source  string  `json:"source,omitempty"` // the emitting execution; listings across executions only
	Version int64   `json:"version"`          // the version of the commit that emitted it
	Target  string  `json:"target,omitempty"` // absent for none
	Event   Payload `json:"event"`
	// CommittedAt is when the commit that emitted it was made, by its committer's clock;
	// absent from entries written before commits recorded it. A pending entry is not acked
	// yet: not delivered, in a handler, or delivered with its ack on the way.
	CommittedAt string `json:"committed_at,omitempty"`
	// Attempts and LastError are the failed deliveries recorded of the entry, absent when none.
	Attempts  int64   `json:"attempts,omitempty"`
	LastError string  `json:"last_error,omitempty"`
	preview   Preview // the event's start, for text output
}

// outboxOf reads the outbox entries of an executions document, by seq.
func outboxOf(doc bson.Raw) ([]OutboxEntry, error) {
	var out []OutboxEntry
	err := entries(doc, ops.FieldOutbox, func(d ops.OutboxDoc) {
		target := ""
		if d.TargetID != nil {
			target = *d.TargetID
		}
		e := OutboxEntry{Seq: d.Seq, Version: d.Version, Target: target,
			Event: describePayload(d.Event), preview: previewPayload(d.Event), Attempts: d.Attempts, LastError: d.LastError}
		if !d.At.IsZero() {
			e.CommittedAt = FormatTime(d.At)
		}
		out = append(out, e)
	})
	slices.SortFunc(out, func(a, b OutboxEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// SpawnEntry is one pending spawn intent.
type SpawnEntry struct {
	Seq      int64           `json:"seq"`
	Version  int64           `json:"version"`
	Child    string          `json:"child"`
	RootPath string          `json:"root_path,omitempty"`
	Context  json.RawMessage `json:"context"`
}

// spawnsOf reads the spawn intents of an executions document, by seq.
func spawnsOf(doc bson.Raw) ([]SpawnEntry, error) {
	var out []SpawnEntry
	err := entries(doc, ops.FieldSpawns, func(d ops.SpawnDoc) {
		out = append(out, SpawnEntry{Seq: d.Seq, Version: d.Version, Child: d.ChildID, RootPath: d.RootPath,
			Context: bsonFields(d.Context)})
	})
	slices.SortFunc(out, func(a, b SpawnEntry) int { return cmp.Compare(a.Seq, b.Seq) })
	return out, err
}

// entries calls each with every entry of the sub-document field (keyed by seq).
func entries[T any](doc bson.Raw, field string, each func(T)) error {
	sub, ok := doc.Lookup(field).DocumentOK()
	if !ok {
		return nil
	}
	elems, err := sub.Elements()
	if err != nil {
		return fmt.Errorf("reading %s: %w", field, err)
	}
	for _, e := range elems {
		var d T
		if err := e.Value().Unmarshal(&d); err != nil {
			return fmt.Errorf("reading %s.%s: %w", field, e.Key(), err)
		}
		each(d)
	}
	return nil
}

// Timer is one durable timer.
type Timer struct {
	Execution string `json:"execution,omitempty"` // listings across executions only
	Path      string `json:"path"`
	// FireAt is RFC 3339 in UTC, to the nanosecond the store reads back (see
	// execstore.TimerOp); absent when the stored value is no fire time (BadFireAt).
	FireAt     string  `json:"fire_at,omitempty"`
	FireAtUnix float64 `json:"fire_at_unix"` // as stored: seconds since the epoch
	InSeconds  float64 `json:"in_seconds"`   // from now; negative when past
	Due        bool    `json:"due"`          // fire_at <= now
	// BadKey is set when the stored key is not one ops.EncodeKey makes; Path is then the
	// key as stored.
	BadKey bool `json:"bad_key,omitempty"`
	// BadFireAt is set when the stored seconds are no time between years 1 and 9999.
	BadFireAt bool `json:"bad_fire_at,omitempty"`
}

// timersOf reads the timers of an executions document, by fire time then path. A timer is
// due as the stores find it: when its fire time read back is at or before now.
func timersOf(doc bson.Raw, now time.Time) ([]Timer, error) {
	sub, ok := doc.Lookup(ops.FieldTimers).DocumentOK()
	if !ok {
		return nil, nil
	}
	elems, err := sub.Elements()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ops.FieldTimers, err)
	}
	out := make([]Timer, 0, len(elems))
	for _, e := range elems {
		at, ok := e.Value().AsFloat64OK()
		if !ok {
			return nil, fmt.Errorf("reading %s: the timer %q holds a %s, not a fire time", ops.FieldTimers, e.Key(), e.Value().Type)
		}
		path, ok := ops.DecodeKey(e.Key())
		if !ok {
			path = e.Key()
		}
		t := Timer{Path: path, FireAtUnix: at, BadKey: !ok}
		if fire, ok := contract.TimeFromStored(at); ok {
			t.FireAt, t.InSeconds, t.Due = fire.Format(time.RFC3339Nano), seconds(fire.Sub(now)), !fire.After(now)
		} else {
			t.BadFireAt = true
		}
		out = append(out, t)
	}
	sortTimers(out)
	return out, nil
}

// sortTimers orders timers by fire time, then execution, then path.
func sortTimers(ts []Timer) {
	slices.SortFunc(ts, func(a, b Timer) int {
		return cmp.Or(cmp.Compare(a.FireAtUnix, b.FireAtUnix), cmp.Compare(a.Execution, b.Execution),
			cmp.Compare(a.Path, b.Path))
	})
}

// TraceStep is one kept trace step.
type TraceStep struct {
	Index  int64           `json:"index"`
	Fields json.RawMessage `json:"fields"`
	// At is when the step was recorded (ops.TraceDoc.At), as FormatTime writes it; absent
	// for a step written before the store recorded it.
	At string `json:"at,omitempty"`
}

// traceOf reads the kept trace steps of an executions document, by index, under either
// profile's shape.
func traceOf(doc bson.Raw) ([]TraceStep, error) {
	v := doc.Lookup(ops.FieldTrace)
	if v.Type != bson.TypeArray && v.Type != bson.TypeEmbeddedDocument {
		return nil, nil
	}
	elems, err := bson.Raw(v.Value).Elements()
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", ops.FieldTrace, err)
	}
	var out []TraceStep
	for _, e := range elems {
		if e.Value().Type != bson.TypeEmbeddedDocument {
			continue // the nulls a $set by index may leave in an array
		}
		var d ops.TraceDoc
		if err := e.Value().Unmarshal(&d); err != nil {
			return nil, fmt.Errorf("reading %s.%s: %w", ops.FieldTrace, e.Key(), err)
		}
		st := TraceStep{Index: d.Index, Fields: bsonFields(d.Step)}
		if !d.At.IsZero() {
			st.At = FormatTime(d.At)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b TraceStep) int { return cmp.Compare(a.Index, b.Index) })
	return out, nil
}

// dedupeOf reads the event ids of an executions document's dedupe set, each once, field by
// field in stored order.
func dedupeOf(doc bson.Raw) []string {
	var ids []string
	seen := map[string]bool{}
	for _, f := range dedupeFields() {
		arr, ok := doc.Lookup(f).ArrayOK()
		if !ok {
			continue
		}
		vals, _ := arr.Values()
		for _, v := range vals {
			if s, ok := v.StringValueOK(); ok && !seen[s] {
				seen[s] = true
				ids = append(ids, s)
			}
		}
	}
	return ids
}

// str is doc's string field f; "" when absent or of another type.
func str(doc bson.Raw, f string) string {
	s, _ := doc.Lookup(f).StringValueOK()
	return s
}

// dateOf is doc's date field f as FormatTime writes it; "" when absent or of another type.
func dateOf(doc bson.Raw, f string) string {
	ms, ok := doc.Lookup(f).DateTimeOK()
	if !ok {
		return ""
	}
	return FormatTime(time.UnixMilli(ms))
}

// integer is doc's integer field f; 0 when absent or of another type.
func integer(doc bson.Raw, f string) int64 {
	n, _ := doc.Lookup(f).AsInt64OK()
	return n
}

// Preview is the start of the entry's event, for a table row.
func (e OutboxEntry) Preview() Preview { return e.preview }
