package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// The fields of an idempotency record, as package idem stores them (idem/record.go). The
// claim token is never read: whoever holds it can complete the key.
const (
	idemState       = "state"
	idemFingerprint = "fingerprint"
	idemFPVersion   = "fingerprint_version"
	idemClaimedAt   = "claimed_at"
	idemLeaseUntil  = "lease_until" // the lease's end, or the retention's once completed
	idemExpireAt    = "expire_at"   // when the record may be reaped
	idemCompletedAt = "completed_at"
	idemStatus      = "response_status"
	idemHeaders     = "response_headers" // [{n: name, v: [values]}]
	idemBody        = "response_body"
	idemHeaderName  = "n"
)

// The states of a record (idem.Claimed, idem.Completed).
const (
	idemClaimed   = "CLAIMED"
	idemCompleted = "COMPLETED"
)

// idemOptions name the record `idem get` prints.
type idemOptions struct {
	output
	Collection string
	Key        string
	Body       bool // print the stored response's body, not only its size
}

// idemReport is one idempotency record.
type idemReport struct {
	Key                string `json:"key"`
	State              string `json:"state"`
	Fingerprint        string `json:"fingerprint"`
	FingerprintVersion int64  `json:"fingerprint_version"`
	ClaimedAt          string `json:"claimed_at"`
	CompletedAt        string `json:"completed_at,omitempty"` // absent unless completed
	// Until is the end of the lease of a claimed record, of the retention of a completed
	// one (UntilIs says which), by the server's clock.
	Until      string `json:"until"`
	UntilIs    string `json:"until_is"`    // "lease" or "retention"
	ReapableAt string `json:"reapable_at"` // expire_at: when the record may be deleted
	// Lapsed: Until has passed at Now. A lapsed claim is taken over by the next claim; a
	// lapsed completed record counts as absent.
	Lapsed bool   `json:"lapsed"`
	Now    string `json:"now"`
	Clock  string `json:"clock"` // "server" ($$NOW or hello's localTime), or "local" when it gave neither
	// Response is the stored response of a completed record; absent otherwise.
	Response *idemResponse `json:"response,omitempty"`
	// Problems lists the fields missing or mistyped; package idem takes a record with any as
	// absent (and the next claim takes it over).
	Problems []string `json:"problems"`
}

// idemResponse is a stored response: its header values are never shown, its body only when
// asked.
type idemResponse struct {
	Status      int64    `json:"status"`
	HeaderNames []string `json:"header_names"`
	BodyBytes   int      `json:"body_bytes"`
	Body        *payload `json:"body,omitempty"` // -body only
}

// getIdem prints one idempotency record: the server's clock, then one find by _id.
func getIdem(ctx context.Context, db *mongo.Database, w io.Writer, o idemOptions) error {
	now, clock := serverNow(ctx, db, o.Now)
	coll := db.Collection(o.Collection)
	doc, err := coll.FindOne(ctx, bson.D{{Key: idField, Value: o.Key}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return notFound("idempotency record", o.Key, coll)
	}
	if err != nil {
		return fmt.Errorf("reading %q from %s.%s: %w", o.Key, db.Name(), coll.Name(), err)
	}
	return emit(w, o.output, readIdem(doc, o.Key, now, clock, o.Body))
}

// readIdem reads the stored record of key, judged at now by clock. The claim token is never
// read; the response's body only when withBody is set.
func readIdem(doc bson.Raw, key string, now time.Time, clock string, withBody bool) *idemReport {
	r := &idemReport{Key: key, Now: formatTime(now), Clock: clock, Problems: []string{}}
	problem := func(f, want string) { r.Problems = append(r.Problems, f+": "+want) }
	text := func(f string) string {
		s, ok := doc.Lookup(f).StringValueOK()
		if !ok {
			problem(f, "missing or not a string")
		}
		return s
	}
	date := func(f string, required bool) (time.Time, string) {
		ms, ok := doc.Lookup(f).DateTimeOK()
		if !ok {
			if required {
				problem(f, "missing or not a date")
			}
			return time.Time{}, ""
		}
		t := time.UnixMilli(ms).UTC()
		return t, formatTime(t)
	}
	r.State = text(idemState)
	r.Fingerprint = text(idemFingerprint)
	v, ok := doc.Lookup(idemFPVersion).AsInt64OK()
	if !ok {
		problem(idemFPVersion, "missing or not an integer")
	}
	r.FingerprintVersion = v
	_, r.ClaimedAt = date(idemClaimedAt, true)
	until, untilText := date(idemLeaseUntil, true)
	r.Until, r.UntilIs = untilText, "lease"
	_, r.ReapableAt = date(idemExpireAt, false)
	r.Lapsed = untilText != "" && now.After(until)
	switch r.State {
	case idemClaimed:
	case idemCompleted:
		r.UntilIs = "retention"
		_, r.CompletedAt = date(idemCompletedAt, true)
		r.Response = readResponse(doc, withBody, problem)
	default:
		problem(idemState, fmt.Sprintf("%q is neither %s nor %s", r.State, idemClaimed, idemCompleted))
	}
	return r
}

// readResponse reads a completed record's response.
func readResponse(doc bson.Raw, withBody bool, problem func(f, want string)) *idemResponse {
	resp := &idemResponse{HeaderNames: []string{}}
	status, ok := doc.Lookup(idemStatus).AsInt64OK()
	if !ok {
		problem(idemStatus, "missing or not an integer")
	}
	resp.Status = status
	if v := doc.Lookup(idemHeaders); v.Type != 0 {
		arr, ok := v.ArrayOK()
		vals, err := arr.Values()
		if !ok || err != nil {
			problem(idemHeaders, "not an array of headers")
		}
		for _, h := range vals {
			entry, ok := h.DocumentOK()
			name, okName := entry.Lookup(idemHeaderName).StringValueOK()
			if !ok || !okName {
				problem(idemHeaders, "a header without a name")
				continue
			}
			resp.HeaderNames = append(resp.HeaderNames, name)
		}
		slices.Sort(resp.HeaderNames)
	}
	if v := doc.Lookup(idemBody); v.Type != 0 {
		_, body, ok := v.BinaryOK()
		if !ok {
			problem(idemBody, "not binary")
		}
		resp.BodyBytes = len(body)
		if withBody {
			p := describePayload(body)
			resp.Body = &p
		}
	}
	return resp
}

func (r *idemReport) writeText(w io.Writer) error {
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
	case r.Lapsed && r.State == idemClaimed:
		lapsed = "yes: the lease has ended; the next claim takes the key over"
	case r.Lapsed && r.State == idemCompleted:
		lapsed = "yes: the retention has ended; the record counts as absent"
	}
	kv := [][2]string{
		{"key", plain(r.Key)},
		{"state", orDash(r.State)},
		{"fingerprint", fp},
		{"claimed at", at(r.ClaimedAt)},
	}
	if r.State == idemCompleted {
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
			body = r.Response.Body.text()
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
