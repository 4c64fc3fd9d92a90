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

// showOptions are what `show` reads and prints.
type showOptions struct {
	output
	Collection string // the executions collection
	ID         string
	Trace      int  // how many of the last trace steps to print; 0 for none
	Dedupe     bool // print the dedupe set's event ids, not only their number
}

// showExecution prints one execution: one find by _id.
func showExecution(ctx context.Context, db *mongo.Database, w io.Writer, o showOptions) error {
	q := inspect.ExecutionQuery{ID: o.ID, Trace: o.Trace, Dedupe: o.Dedupe}
	r, err := inspect.ReadExecution(ctx, db.Collection(o.Collection), q, o.Now)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeExecution)
}

// writeExecution writes one execution for people.
func writeExecution(w io.Writer, r *inspect.Execution) error {
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
		{"created", orDash(r.CreatedAt)},
		{"updated", orDash(r.UpdatedAt)},
		{"data", r.Data.Line()},
	}); err != nil {
		return err
	}

	fmt.Fprintf(w, "\noutbox: %s\n", pending(len(r.Outbox)))
	if len(r.Outbox) > 0 {
		rows := make([][]string, len(r.Outbox))
		for i, e := range r.Outbox {
			rows[i] = []string{strconv.FormatInt(e.Seq, 10), strconv.FormatInt(e.Version, 10), orDash(e.Target),
				committed(e.CommittedAt, r.Now), e.Preview().Line()}
		}
		if err := table(w, "  ", []string{"SEQ", "VERSION", "TARGET", "COMMITTED", "EVENT"}, rows); err != nil {
			return err
		}
		fmt.Fprintln(w, "  "+awaitingAcks(r.Status))
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
		if err := writeDead(w, r.Dead); err != nil {
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
			rows[i] = []string{strconv.FormatInt(s.Index, 10), orDash(s.At), string(s.Fields)}
		}
		if err := table(w, "  ", []string{"INDEX", "AT", "STEP"}, rows); err != nil {
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

// committed is an entry's commit time and how long ago it was, "-" when not recorded.
func committed(at, now string) string {
	if at == "" {
		return "-"
	}
	return at + " (" + relativeTo(at, now) + ")"
}

// awaitingAcks says what a pending entry is: not acked yet. Of a finished execution, whose
// last commit wrote them, it says what that means.
func awaitingAcks(status string) string {
	if execstore.Status(status).Finished() {
		return "pending: not acked yet (not delivered, in a handler, or delivered with its ack on the way); the execution is finished, so no commit of its own will carry the acks: each is written alone, within aio.Options.AckWait of its delivery"
	}
	return "pending: not acked yet (not delivered, in a handler, or delivered with its ack on the way)"
}

// countOrNone is "none" or the number.
func countOrNone(n int) string {
	if n == 0 {
		return "none"
	}
	return strconv.Itoa(n)
}

// timerTable writes timers; withExecution adds the execution column.
func timerTable(w io.Writer, ts []inspect.Timer, withExecution bool) error {
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
