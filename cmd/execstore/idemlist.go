package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/contract"
)

// idemToken is the field of the claim token, which no read of this command returns.
const idemToken = "claim_token"

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

// idemListReport is one page of the idempotency records under a prefix.
type idemListReport struct {
	Prefix string        `json:"prefix"`
	Items  []*idemReport `json:"items"` // as `idem get` prints each, never with a body
	// NextCursor resumes the listing (-after); absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
	Now        string `json:"now"`
	Clock      string `json:"clock"`
}

// prefixRange selects the keys that start with prefix, as idem.Store.List selects them.
var prefixRange = contract.PrefixRange

// idemListFilter is the filter of o's page: the keys under its prefix, after its cursor.
func idemListFilter(o idemListOptions) bson.D {
	keys := prefixRange(o.Prefix)
	if after := afterID(o.After); after != "" {
		keys = append(keys, bson.E{Key: "$gt", Value: after})
	}
	return bson.D{{Key: idField, Value: keys}}
}

// listIdem prints one page of the records whose key starts with the prefix, in key order:
// the server's clock, then one find on the _id index, limit+1 so that the last page is known
// without another round trip. Unlike idem.Store.List it shows completed records past their
// retention too, marked lapsed. The claim token is left out of the read.
func listIdem(ctx context.Context, db *mongo.Database, w io.Writer, o idemListOptions) error {
	now, clock := serverNow(ctx, db, o.Now)
	coll := db.Collection(o.Collection)
	cur, err := coll.Find(ctx, idemListFilter(o), options.Find().
		SetProjection(bson.D{{Key: idemToken, Value: 0}}).
		SetSort(bson.D{{Key: idField, Value: 1}}).
		SetLimit(int64(o.Limit)+1))
	if err != nil {
		return fmt.Errorf("listing %q in %s.%s: %w", o.Prefix, db.Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &idemListReport{Prefix: o.Prefix, Items: []*idemReport{}, Now: formatTime(now), Clock: clock}
	for cur.Next(ctx) {
		key, _ := cur.Current.Lookup(idField).StringValueOK()
		if !strings.HasPrefix(key, o.Prefix) {
			continue
		}
		r.Items = append(r.Items, readIdem(cur.Current, key, now, clock, false))
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("listing %q in %s.%s: %w", o.Prefix, db.Name(), coll.Name(), err)
	}
	if len(r.Items) > o.Limit {
		r.Items = r.Items[:o.Limit]
		r.NextCursor = contract.EncodeCursor(r.Items[o.Limit-1].Key)
	}
	return emit(w, o.output, r)
}

func (r *idemListReport) writeText(w io.Writer) error {
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
