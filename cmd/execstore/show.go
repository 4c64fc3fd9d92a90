package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/ops"
)

// showOptions are what `show` reads and prints.
type showOptions struct {
	output
	Collection string // the executions collection
	ID         string
	Trace      int  // how many of the last trace steps to print; 0 for none
	Dedupe     bool // print the dedupe set's event ids, not only their number
}

// showReport is one execution, as `show` prints it.
type showReport struct {
	ID         string  `json:"id"`
	Definition string  `json:"definition,omitempty"`
	Status     string  `json:"status"`
	Parent     string  `json:"parent,omitempty"` // absent for a root
	Version    int64   `json:"version"`
	TraceNext  int64   `json:"trace_next"`
	Data       payload `json:"data"`
	Now        string  `json:"now"` // what timers are measured from

	Outbox []outboxEntry `json:"outbox"`
	Timers []timer       `json:"timers"`
	Spawns []spawnEntry  `json:"spawns"`
	// TraceKept is how many steps the execution keeps; Trace holds the last of them.
	TraceKept int         `json:"trace_kept"`
	Trace     []traceStep `json:"trace"`
	// DedupeSize is the number of event ids in the dedupe set; Dedupe lists them only when
	// asked (-dedupe), else it is absent.
	DedupeSize int      `json:"dedupe_size"`
	Dedupe     []string `json:"dedupe,omitzero"`
	// Dead are the execution's dead items, absent when it has none.
	Dead []deadItem `json:"dead,omitempty"`
}

// notFoundError is what the commands return for an id or key no document has.
type notFoundError struct {
	what, id  string
	namespace string // database.collection
}

func (e *notFoundError) Error() string {
	return fmt.Sprintf("no %s %q in %s", e.what, e.id, e.namespace)
}

// notFound says that no document of what has id in coll.
func notFound(what, id string, coll *mongo.Collection) error {
	return &notFoundError{what: what, id: id, namespace: coll.Database().Name() + "." + coll.Name()}
}

// showExecution prints one execution: one find by _id.
func showExecution(ctx context.Context, db *mongo.Database, w io.Writer, o showOptions) error {
	r, err := readExecution(ctx, db, o)
	if err != nil {
		return err
	}
	return emit(w, o.output, r)
}

// readExecution reads one execution into its report.
func readExecution(ctx context.Context, db *mongo.Database, o showOptions) (*showReport, error) {
	coll := db.Collection(o.Collection)
	doc, err := coll.FindOne(ctx, bson.D{{Key: idField, Value: o.ID}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, notFound("execution", o.ID, coll)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %q from %s.%s: %w", o.ID, db.Name(), coll.Name(), err)
	}
	_, data, _ := doc.Lookup(ops.FieldData).BinaryOK()
	r := &showReport{
		ID:         o.ID,
		Definition: str(doc, ops.FieldDefinitionID),
		Status:     str(doc, ops.FieldStatus),
		Parent:     str(doc, ops.FieldParentID),
		Version:    integer(doc, ops.FieldVersion),
		TraceNext:  integer(doc, ops.FieldTraceNext),
		Data:       describePayload(data),
		Now:        formatTime(o.Now),
	}
	if r.Outbox, err = outboxOf(doc); err != nil {
		return nil, err
	}
	if r.Timers, err = timersOf(doc, o.Now); err != nil {
		return nil, err
	}
	if r.Spawns, err = spawnsOf(doc); err != nil {
		return nil, err
	}
	if r.Dead, err = deadOf(doc); err != nil {
		return nil, err
	}
	trace, err := traceOf(doc)
	if err != nil {
		return nil, err
	}
	r.TraceKept = len(trace)
	r.Trace = trace[max(0, len(trace)-o.Trace):]
	ids := dedupeOf(doc)
	r.DedupeSize = len(ids)
	if o.Dedupe {
		r.Dedupe = ids
	}
	// Empty lists print as [] in JSON, so that scripts need not tell null from none.
	r.Outbox, r.Timers, r.Spawns, r.Trace = nonNil(r.Outbox), nonNil(r.Timers), nonNil(r.Spawns), nonNil(r.Trace)
	if o.Dedupe {
		r.Dedupe = nonNil(r.Dedupe)
	}
	return r, nil
}

// nonNil returns s, or an empty slice for nil.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func (r *showReport) writeText(w io.Writer) error {
	parent := "(root)"
	if r.Parent != "" {
		parent = plain(r.Parent)
	}
	if err := pairs(w, "", [][2]string{
		{"execution", plain(r.ID)},
		{"definition", orDash(r.Definition)},
		{"status", orDash(r.Status)},
		{"parent", parent},
		{"version", strconv.FormatInt(r.Version, 10)},
		{"data", r.Data.text()},
	}); err != nil {
		return err
	}

	fmt.Fprintf(w, "\noutbox: %s\n", pending(len(r.Outbox)))
	if len(r.Outbox) > 0 {
		rows := make([][]string, len(r.Outbox))
		for i, e := range r.Outbox {
			rows[i] = []string{strconv.FormatInt(e.Seq, 10), strconv.FormatInt(e.Version, 10), orDash(e.Target), e.preview.text()}
		}
		if err := table(w, "  ", []string{"SEQ", "VERSION", "TARGET", "EVENT"}, rows); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\ntimers: %s (now %s)\n", countOrNone(len(r.Timers)), r.Now)
	if len(r.Timers) > 0 {
		if err := timerTable(w, r.Timers, false); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\nspawns: %s\n", pending(len(r.Spawns)))
	if len(r.Spawns) > 0 {
		rows := make([][]string, len(r.Spawns))
		for i, s := range r.Spawns {
			rows[i] = []string{strconv.FormatInt(s.Seq, 10), strconv.FormatInt(s.Version, 10), plain(s.Child),
				orDash(s.RootPath), string(s.Context)}
		}
		if err := table(w, "  ", []string{"SEQ", "VERSION", "CHILD", "ROOT PATH", "CONTEXT"}, rows); err != nil {
			return err
		}
	}

	if len(r.Dead) > 0 {
		fmt.Fprintln(w)
		if err := (&deadReport{Items: r.Dead}).writeText(w); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\ntrace: %s kept, next index %d", countOrNone(r.TraceKept), r.TraceNext)
	if len(r.Trace) < r.TraceKept {
		fmt.Fprintf(w, "; the last %d (-trace N shows more)", len(r.Trace))
	}
	fmt.Fprintln(w)
	if len(r.Trace) > 0 {
		rows := make([][]string, len(r.Trace))
		for i, s := range r.Trace {
			rows[i] = []string{strconv.FormatInt(s.Index, 10), string(s.Fields)}
		}
		if err := table(w, "  ", []string{"INDEX", "STEP"}, rows); err != nil {
			return err
		}
	}

	fmt.Fprintf(w, "\ndedupe set: %s", plural(r.DedupeSize, "event id", "event ids"))
	if r.Dedupe == nil {
		if r.DedupeSize > 0 {
			fmt.Fprint(w, " (-dedupe lists them)")
		}
		_, err := fmt.Fprintln(w)
		return err
	}
	fmt.Fprintln(w)
	for _, id := range r.Dedupe {
		if _, err := fmt.Fprintf(w, "  %s\n", plain(id)); err != nil {
			return err
		}
	}
	return nil
}

// pending is "none pending" or "N pending".
func pending(n int) string {
	if n == 0 {
		return "none pending"
	}
	return strconv.Itoa(n) + " pending"
}

// countOrNone is "none" or the number.
func countOrNone(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// timerTable writes timers; withExecution adds the execution column.
func timerTable(w io.Writer, ts []timer, withExecution bool) error {
	header := []string{"PATH", "FIRE AT", "FROM NOW", "DUE"}
	if withExecution {
		header = append([]string{"EXECUTION"}, header...)
	}
	rows := make([][]string, len(ts))
	for i, t := range ts {
		path := plain(t.Path)
		if t.BadKey {
			path = "(stored key " + strconv.Quote(t.Path) + ", not an encoded path)"
		}
		due := ""
		if t.Due {
			due = "due"
		}
		fireAt, fromNow := t.FireAt, relativeSeconds(t.InSeconds)
		if t.BadFireAt {
			fireAt, fromNow = "(stored "+strconv.FormatFloat(t.FireAtUnix, 'g', -1, 64)+", not a time)", "-"
		}
		row := []string{path, fireAt, fromNow, due}
		if withExecution {
			row = append([]string{plain(t.Execution)}, row...)
		}
		rows[i] = row
	}
	return table(w, "  ", header, rows)
}
