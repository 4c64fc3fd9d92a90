package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/ops"
)

// outboxOptions select the entries `outbox` prints.
type outboxOptions struct {
	output
	Collection string
	Limit      int // at least 1
}

// outboxReport is the oldest pending outbox entries across executions. An entry records
// no time (ops.OutboxDoc: seq, version, target, event), so there is no age to show: the
// seq orders entries globally, the version within their execution.
type outboxReport struct {
	Pending    int           `json:"pending"`    // entries pending in all
	Executions int           `json:"executions"` // executions holding them
	Entries    []outboxEntry `json:"entries"`    // the oldest Limit of them, by seq
}

// listOutbox prints the oldest pending entries: one find of the executions that hold any
// (ops.PendingOutboxFilter), projecting only the outbox. Every pending entry is read, since
// seqs live inside the documents. No index serves the filter alone (the stores' scan indexes
// lead with the partition), so the server reads the whole collection.
func listOutbox(ctx context.Context, db *mongo.Database, w io.Writer, o outboxOptions) error {
	coll := db.Collection(o.Collection)
	cur, err := coll.Find(ctx, ops.PendingOutboxFilter(),
		options.Find().SetProjection(bson.D{{Key: ops.FieldOutbox, Value: 1}}))
	if err != nil {
		return fmt.Errorf("reading the outbox of %s.%s: %w", db.Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &outboxReport{}
	var all []outboxEntry
	for cur.Next(ctx) {
		entries, err := outboxOf(cur.Current)
		if err != nil {
			return fmt.Errorf("execution %q: %w", str(cur.Current, idField), err)
		}
		if len(entries) == 0 {
			continue
		}
		r.Executions++
		for _, e := range entries {
			e.Source = str(cur.Current, idField)
			all = append(all, e)
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("reading the outbox of %s.%s: %w", db.Name(), coll.Name(), err)
	}
	slices.SortFunc(all, func(a, b outboxEntry) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Source, b.Source))
	})
	r.Pending = len(all)
	r.Entries = nonNil(all[:min(len(all), o.Limit)])
	return emit(w, o.output, r)
}

func (r *outboxReport) writeText(w io.Writer) error {
	if r.Pending == 0 {
		_, err := fmt.Fprintln(w, "outbox: none pending")
		return err
	}
	fmt.Fprintf(w, "outbox: %s pending in %s", strconv.Itoa(r.Pending), plural(r.Executions, "execution", "executions"))
	if len(r.Entries) < r.Pending {
		fmt.Fprintf(w, "; the oldest %d", len(r.Entries))
	}
	fmt.Fprintln(w)
	rows := make([][]string, len(r.Entries))
	for i, e := range r.Entries {
		rows[i] = []string{strconv.FormatInt(e.Seq, 10), plain(e.Source), strconv.FormatInt(e.Version, 10),
			orDash(e.Target), e.preview.text()}
	}
	return table(w, "  ", []string{"SEQ", "SOURCE", "VERSION", "TARGET", "EVENT"}, rows)
}
