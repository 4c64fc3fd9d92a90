package inspect

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
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
	IdemClaimed   = "CLAIMED"
	IdemCompleted = "COMPLETED"
)

// IdemRecord is one idempotency record.
type IdemRecord struct {
	Key                string `json:"key"`
	State              string `json:"state"`
	Fingerprint        string `json:"fingerprint"`
	FingerprintVersion int64  `json:"fingerprint_version"`
	ClaimedAt          string `json:"claimed_at"`
	// Holder is the name the claim that took the record gave its claimer (idem's
	// Record.Holder); absent when it gave none.
	Holder      string `json:"holder,omitempty"`
	CompletedAt string `json:"completed_at,omitempty"` // absent unless completed
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
	Response *IdemResponse `json:"response,omitempty"`
	// Problems lists the fields missing or mistyped; package idem takes a record with any as
	// absent (and the next claim takes it over).
	Problems []string `json:"problems"`
}

// IdemResponse is a stored response: its header values are never shown, its body only when
// asked.
type IdemResponse struct {
	Status      int64    `json:"status"`
	HeaderNames []string `json:"header_names"`
	BodyBytes   int      `json:"body_bytes"`
	Body        *Payload `json:"body,omitempty"` // only when asked
}

// GetIdem reads the idempotency record of key in the idem store's collection coll: the
// server's clock (ServerNow, local when it gives none), then one find by _id. The claim token
// is never read; the response's body only when withBody is set. An unknown key is a
// *NotFoundError.
func GetIdem(ctx context.Context, coll *mongo.Collection, key string, withBody bool, local time.Time) (*IdemRecord, error) {
	now, clock := ServerNow(ctx, coll.Database(), local)
	doc, err := coll.FindOne(ctx, bson.D{{Key: idField, Value: key}}, options.FindOne().
		SetProjection(bson.D{{Key: idemToken, Value: 0}})).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, notFound("idempotency record", key, coll)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %q from %s.%s: %w", key, coll.Database().Name(), coll.Name(), err)
	}
	return readIdem(doc, key, now, clock, withBody), nil
}

// readIdem reads the stored record of key, judged at now by clock. The claim token is never
// read; the response's body only when withBody is set.
func readIdem(doc bson.Raw, key string, now time.Time, clock string, withBody bool) *IdemRecord {
	r := &IdemRecord{Key: key, Now: FormatTime(now), Clock: clock, Problems: []string{}}
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
		return t, FormatTime(t)
	}
	r.State = text(idemState)
	r.Fingerprint = text(idemFingerprint)
	v, ok := doc.Lookup(idemFPVersion).AsInt64OK()
	if !ok {
		problem(idemFPVersion, "missing or not an integer")
	}
	r.FingerprintVersion = v
	_, r.ClaimedAt = date(idemClaimedAt, true)
	r.Holder, _ = doc.Lookup(idemHolder).StringValueOK()
	until, untilText := date(idemLeaseUntil, true)
	r.Until, r.UntilIs = untilText, "lease"
	_, r.ReapableAt = date(idemExpireAt, false)
	r.Lapsed = untilText != "" && now.After(until)
	switch r.State {
	case IdemClaimed:
	case IdemCompleted:
		r.UntilIs = "retention"
		_, r.CompletedAt = date(idemCompletedAt, true)
		r.Response = readResponse(doc, withBody, problem)
	default:
		problem(idemState, fmt.Sprintf("%q is neither %s nor %s", r.State, IdemClaimed, IdemCompleted))
	}
	return r
}

// readResponse reads a completed record's response.
func readResponse(doc bson.Raw, withBody bool, problem func(f, want string)) *IdemResponse {
	resp := &IdemResponse{HeaderNames: []string{}}
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
