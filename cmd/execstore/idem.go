package main

import (
	"context"
	"io"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
)

// idemOptions name the record `idem get` prints.
type idemOptions struct {
	output
	Collection string
	Key        string
	Body       bool // print the stored response's body, not only its size
}

// getIdem prints one idempotency record: the server's clock, then one find by _id.
func getIdem(ctx context.Context, db *mongo.Database, w io.Writer, o idemOptions) error {
	r, err := inspect.GetIdem(ctx, db.Collection(o.Collection), o.Key, o.Body, o.Now)
	if err != nil {
		return err
	}
	return emit(w, o.output, r, writeIdem)
}

// writeIdem writes one idempotency record for people.
func writeIdem(w io.Writer, r *inspect.IdemRecord) error {
	now, _ := time.Parse(time.RFC3339Nano, r.Now)
	at := func(s string) string {
		if s == "" {
			return "-"
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return s
		}
		return s + " (" + relative(t, now) + ")"
	}
	fp := plain(r.Fingerprint) + " (version " + strconv.FormatInt(r.FingerprintVersion, 10) + ")"
	lapsed := yesNo(r.Lapsed)
	switch {
	case r.Lapsed && r.State == inspect.IdemClaimed:
		lapsed = "yes: the lease has ended; the next claim takes the key over"
	case r.Lapsed && r.State == inspect.IdemCompleted:
		lapsed = "yes: the retention has ended; the record counts as absent"
	}
	kv := [][2]string{
		{"key", plain(r.Key)},
		{"state", orDash(r.State)},
		{"fingerprint", fp},
		{"claimed at", at(r.ClaimedAt)},
	}
	if r.Holder != "" {
		kv = append(kv, [2]string{"holder", plain(r.Holder)})
	}
	if r.State == inspect.IdemCompleted {
		kv = append(kv, [2]string{"completed at", at(r.CompletedAt)})
	}
	kv = append(kv,
		[2]string{r.UntilIs + " until", at(r.Until)},
		[2]string{"lapsed", lapsed},
		[2]string{"reapable at", at(r.ReapableAt)},
		[2]string{"now", r.Now + " (" + r.Clock + " clock)"},
	)
	if r.Response != nil {
		headers := "none"
		if len(r.Response.HeaderNames) > 0 {
			names := make([]string, len(r.Response.HeaderNames))
			for i, n := range r.Response.HeaderNames {
				names[i] = plain(n)
			}
			headers = strings.Join(names, ", ")
		}
		body := plural(r.Response.BodyBytes, "byte", "bytes")
		if r.Response.Body != nil {
			body = r.Response.Body.Line()
		} else if r.Response.BodyBytes > 0 {
			body += " (-body shows it)"
		}
		kv = append(kv,
			[2]string{"response status", strconv.FormatInt(r.Response.Status, 10)},
			[2]string{"response headers", headers},
			[2]string{"response body", body},
		)
	}
	for _, p := range r.Problems {
		kv = append(kv, [2]string{"unreadable", plain(p) + " (idem takes this record as absent)"})
	}
	return pairs(w, "", kv)
}
