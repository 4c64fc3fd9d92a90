package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
)

// defaultIdemListLimit is the page size of `idem list` unless -limit says otherwise.
const defaultIdemListLimit = 50

// idemListOptions select the records `idem list` prints.
type idemListOptions struct {
	output
	Collection string
	Prefix     string
	Limit      int    // page size, 1 to contract.MaxListLimit
	After      string // a cursor `idem list` printed, or a key; "" from the start
}

// listIdem prints one page of the records whose key starts with the prefix, in key order:
// the server's clock, then one find on the _id index (see inspect.ListIdem).
func listIdem(ctx context.Context, db *mongo.Database, w io.Writer, o idemListOptions) error {
	q := inspect.IdemListQuery{Prefix: o.Prefix, Limit: o.Limit, After: o.After}
	r, err := inspect.ListIdem(ctx, db.Collection(o.Collection), q, o.Now)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeIdemList)
}

// writeIdemList writes one page of idempotency records for people.
func writeIdemList(w io.Writer, r *inspect.IdemPage) error {
	if len(r.Items) == 0 {
		_, err := fmt.Fprintf(w, "no idempotency records under %s (now %s, %s clock)\n", plain(r.Prefix), r.Now, r.Clock)
		return err
	}
	rows := make([][]string, len(r.Items))
	var unreadable []string
	for i, rec := range r.Items {
		fp := plain(rec.Fingerprint) + " (v" + strconv.FormatInt(rec.FingerprintVersion, 10) + ")"
		until, fromNow := "-", "-"
		if rec.Until != "" {
			until = rec.UntilIs + " " + rec.Until
			fromNow = relativeTo(rec.Until, r.Now)
		}
		response := "-"
		if p := rec.Response; p != nil {
			response = strconv.FormatInt(p.Status, 10) + ", " + plural(len(p.HeaderNames), "header", "headers") + ", " +
				plural(p.BodyBytes, "byte", "bytes")
		}
		rows[i] = []string{plain(rec.Key), orDash(rec.State), fp, orDash(rec.ClaimedAt), until, fromNow, yesNo(rec.Lapsed), response}
		for _, p := range rec.Problems {
			unreadable = append(unreadable, plain(rec.Key)+": "+plain(p))
		}
	}
	header := []string{"KEY", "STATE", "FINGERPRINT", "CLAIMED AT", "UNTIL", "FROM NOW", "LAPSED", "RESPONSE"}
	if err := table(w, "", header, rows); err != nil {
		return err
	}
	for _, u := range unreadable {
		fmt.Fprintf(w, "unreadable: %s (idem takes this record as absent)\n", u)
	}
	next := "last page"
	if r.NextCursor != "" {
		next = "next page: -after " + r.NextCursor
	}
	_, err := fmt.Fprintf(w, "\n%s; %s (now %s, %s clock)\n", plural(len(r.Items), "record", "records"), next, r.Now, r.Clock)
	return err
}
