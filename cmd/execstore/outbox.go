package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
)

// outboxOptions select the entries `outbox` prints.
type outboxOptions struct {
	output
	Collection string
	Limit      int // at least 1
}

// listOutbox prints the oldest pending entries: one find of the executions that hold any
// (see inspect.ReadOutbox).
func listOutbox(ctx context.Context, db *mongo.Database, w io.Writer, o outboxOptions) error {
	r, err := inspect.ReadOutbox(ctx, db.Collection(o.Collection), o.Limit)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeOutbox)
}

// writeOutbox writes the pending outbox for people.
func writeOutbox(w io.Writer, r *inspect.Outbox) error {
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
			orDash(e.Target), orDash(e.CommittedAt), e.Preview().Line()}
	}
	return table(w, "  ", []string{"SEQ", "SOURCE", "VERSION", "TARGET", "COMMITTED", "EVENT"}, rows)
}
