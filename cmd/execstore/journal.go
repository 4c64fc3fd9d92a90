package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/ops"
)

// journalOptions name the invocation `journal show` prints.
type journalOptions struct {
	output
	Collection string
	ID         string
}

// showJournal prints one invocation's metadata: one find by _id.
func showJournal(ctx context.Context, db *mongo.Database, w io.Writer, o journalOptions) error {
	r, err := inspect.ReadInvocation(ctx, db.Collection(o.Collection), o.ID)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeJournal)
}

// writeJournal writes one invocation's metadata for people.
func writeJournal(w io.Writer, r *inspect.Invocation) error {
	ckpt, prepared := "none", "nothing"
	if c := r.Checkpoint; c != nil {
		ckpt = fmt.Sprintf("%s, phase %s; %s", plain(c.ID), orDash(c.Phase), c.Sealed.Line())
	}
	if p := r.Prepared; p != nil {
		prepared = fmt.Sprintf("from checkpoint %s; %s", plain(p.From), p.Sealed.Line())
	}
	if err := pairs(w, "", [][2]string{
		{"invocation", plain(r.ID)},
		{"scope", orDash(r.Scope)},
		{"digest", orDash(r.Digest)},
		{"owner", orDash(r.Owner)},
		{"revision", strconv.FormatInt(r.Revision, 10)},
		{"checkpoint", ckpt},
		{"prepared", prepared},
		{"attempts", strconv.FormatInt(r.Attempts, 10)},
		{"latest", orDash(r.Latest)},
		{"no replay", yesNo(r.NoReplay)},
	}); err != nil {
		return err
	}
	fmt.Fprintf(w, "\nreceipts: %s\n", countOrNone(len(r.Receipts)))
	if len(r.Receipts) > 0 {
		rows := make([][]string, len(r.Receipts))
		for i, rc := range r.Receipts {
			rows[i] = []string{strconv.FormatInt(rc.Attempt, 10), orDash(rc.Outcome), rc.Sealed.Line()}
		}
		if err := table(w, "  ", []string{"ATTEMPT", "OUTCOME", "EVIDENCE"}, rows); err != nil {
			return err
		}
	}
	_, err := fmt.Fprintln(w, "\n(sealed payloads are never opened here: sizes and key ids only)")
	return err
}

// journalListOptions select the invocations `journal list` prints.
type journalListOptions struct {
	output
	Collection string
	Query      inspect.InvocationQuery
}

// listJournal prints a page of invocations: one find sorted by _id.
func listJournal(ctx context.Context, db *mongo.Database, w io.Writer, o journalListOptions) error {
	r, err := inspect.ListInvocations(ctx, db.Collection(o.Collection), o.Query)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeJournalList)
}

// writeJournalList writes a page of invocations for people.
func writeJournalList(w io.Writer, r *inspect.InvocationPage) error {
	if len(r.Items) == 0 {
		_, err := fmt.Fprintln(w, "invocations: none")
		return err
	}
	rows := make([][]string, len(r.Items))
	for i, inv := range r.Items {
		rows[i] = []string{plain(inv.ID), orDash(inv.Owner), strconv.FormatInt(inv.Revision, 10), orDash(inv.Phase),
			strconv.FormatInt(inv.Attempts, 10), orDash(inv.Latest), yesNo(inv.NoReplay), orDash(inv.ReceiptAt)}
	}
	last := "last page"
	if r.NextCursor != "" {
		last = "more: -after " + r.NextCursor
	}
	fmt.Fprintf(w, "invocations: %d; %s\n", len(r.Items), last)
	return table(w, "  ", []string{"INVOCATION", "OWNER", "REVISION", "PHASE", "ATTEMPTS", "LATEST", "NO REPLAY", "RECEIPT AT"}, rows)
}

// journalRetentionOptions name the journal collection whose retention totals
// `journal retention` prints.
type journalRetentionOptions struct {
	output
	Collection string
}

// showJournalRetention prints what the journal's retention deleted: one find by _id in the
// counters collection.
func showJournalRetention(ctx context.Context, db *mongo.Database, w io.Writer, o journalRetentionOptions) error {
	r, err := inspect.ReadJournalRetention(ctx, db.Collection(ops.CountersCollection), o.Collection)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeJournalRetention)
}

// writeJournalRetention writes the journal's retention totals for people.
func writeJournalRetention(w io.Writer, r *inspect.JournalRetention) error {
	last := "never"
	if r.LastAt != "" {
		last = r.LastAt
	}
	return pairs(w, "", [][2]string{
		{"journal", plain(r.Collection)},
		{"deleted", strconv.FormatInt(r.Deleted, 10) + " finished invocations, for their retention"},
		{"last deleted at", last},
	})
}
