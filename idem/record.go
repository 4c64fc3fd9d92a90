package idem

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
)

// State is the state of a stored record.
type State string

// The states of a record.
const (
	// Claimed: a caller holds the key under a lease and is running the request.
	Claimed State = "CLAIMED"
	// Completed: the request ran; its response is stored and replayed until the record's
	// retention ends.
	Completed State = "COMPLETED"
)

// Response is what a completed request answered: replayed byte for byte to every later
// request with the same key until the record's retention ends.
type Response struct {
	Status int         // an HTTP status, or any code of the caller's between 100 and 999
	Header http.Header // may be nil
	Body   []byte      // may be nil
}

// Record is one key's stored record.
type Record struct {
	Key                string
	State              State
	Fingerprint        string // the fingerprint of the request that claimed the key
	FingerprintVersion int    // the version of the fingerprint's algorithm
	ClaimedAt          time.Time
	// Until is when the record lapses, by the server's clock: the end of the lease of a
	// Claimed record, the end of the retention of a Completed one.
	Until time.Time
	// Lapsed reports that Until had passed when the record was read: a Claimed record whose
	// lease lapsed (the next Claim reclaims it). A Completed record past its retention is
	// never returned: it counts as absent.
	Lapsed      bool
	CompletedAt time.Time // Completed only
	Response    *Response // Completed only
	// Holder is the name the claim that took the record gave its claimer (ClaimAs): a
	// process, a relay member. Empty for a claim made with Claim. Not a secret, and proves
	// nothing: the token does.
	Holder string

	token string // the claim token; never handed to anyone but its holder
}

// The record's fields in the collection.
const (
	fState       = "state"
	fFingerprint = "fingerprint"
	fFPVersion   = "fingerprint_version"
	fToken       = "claim_token"
	fClaimedAt   = "claimed_at"
	fLeaseUntil  = "lease_until" // the lease's end, or the retention's once completed
	fExpireAt    = "expire_at"   // lease_until plus Options.Grace: when the record may be reaped
	fCompletedAt = "completed_at"
	fStatus      = "response_status"
	fHeaders     = "response_headers"
	fBody        = "response_body"
	fPrevState   = "prev_state" // the state a claim took the record over from, by either formulation
	fHolder      = "holder"     // ClaimAs's holder; absent or empty for Claim's
)

// stateless reports whether a stored document has no state: it holds no claim and no
// response, and a claim takes it as absent (New, not RecoveredFromCorrupt). MongoDB's atomic
// claim cannot tell such a document from a missing one (an upsert creates exactly that
// before its pipeline runs), so neither formulation does.
func stateless(raw bson.Raw) bool {
	_, err := raw.LookupErr(fState)
	return err != nil
}

// decodeRecord reads a stored document. Any missing or mistyped field makes it unreadable
// (ok false): such a record is treated as absent, and a claim takes it over.
func decodeRecord(raw bson.Raw) (rec *Record, ok bool) {
	r := &Record{}
	str := func(f string) (string, bool) {
		v, err := raw.LookupErr(f)
		if err != nil {
			return "", false
		}
		return v.StringValueOK()
	}
	date := func(f string) (time.Time, bool) {
		v, err := raw.LookupErr(f)
		if err != nil {
			return time.Time{}, false
		}
		d, ok := v.DateTimeOK()
		return time.UnixMilli(d).UTC(), ok
	}
	integer := func(f string) (int, bool) {
		v, err := raw.LookupErr(f)
		if err != nil {
			return 0, false
		}
		if i, ok := v.Int32OK(); ok {
			return int(i), true
		}
		i, ok := v.Int64OK()
		return int(i), ok
	}
	var state string
	var okKey, okState, okFP, okV, okTok, okAt, okUntil bool
	r.Key, okKey = str("_id")
	state, okState = str(fState)
	r.State = State(state)
	r.Fingerprint, okFP = str(fFingerprint)
	r.FingerprintVersion, okV = integer(fFPVersion)
	r.token, okTok = str(fToken)
	r.ClaimedAt, okAt = date(fClaimedAt)
	r.Until, okUntil = date(fLeaseUntil)
	r.Holder, _ = str(fHolder) // optional: a record without one (or of an earlier version) names none
	if !(okKey && okState && okFP && okV && okTok && okAt && okUntil) || len(r.token) != tokenHexLen {
		return nil, false
	}
	switch r.State {
	case Claimed:
		return r, true
	case Completed:
	default:
		return nil, false
	}
	var okDone, okStatus bool
	resp := &Response{}
	r.CompletedAt, okDone = date(fCompletedAt)
	resp.Status, okStatus = integer(fStatus)
	if !okDone || !okStatus {
		return nil, false
	}
	if v, err := raw.LookupErr(fBody); err == nil {
		_, b, ok := v.BinaryOK()
		if !ok {
			return nil, false
		}
		if len(b) > 0 {
			resp.Body = append([]byte(nil), b...)
		}
	}
	if v, err := raw.LookupErr(fHeaders); err == nil {
		h, ok := decodeHeader(v)
		if !ok {
			return nil, false
		}
		resp.Header = h
	}
	r.Response = resp
	return r, true
}

// decodeHeader reads response headers stored as encodeHeader writes them.
func decodeHeader(v bson.RawValue) (http.Header, bool) {
	arr, ok := v.ArrayOK()
	if !ok {
		return nil, false
	}
	entries, err := arr.Values()
	if err != nil {
		return nil, false
	}
	if len(entries) == 0 {
		return nil, true
	}
	h := make(http.Header, len(entries))
	for _, e := range entries {
		entry, ok := e.DocumentOK()
		if !ok {
			return nil, false
		}
		name, ok := entry.Lookup(hName).StringValueOK()
		if !ok {
			return nil, false
		}
		vals, ok := entry.Lookup(hValues).ArrayOK()
		if !ok {
			return nil, false
		}
		values, err := vals.Values()
		if err != nil {
			return nil, false
		}
		for _, x := range values {
			s, ok := x.StringValueOK()
			if !ok {
				return nil, false
			}
			h[name] = append(h[name], s)
		}
	}
	return h, true
}

// Fields of a stored header.
const (
	hName   = "n"
	hValues = "v"
)

// encodeHeader is the stored form of h: an array of {n: name, v: [values]}, names sorted so
// that the same headers always make the same document. (Header names may hold "." and "$",
// which field names must not; FerretDB stores no nested arrays.)
func encodeHeader(h http.Header) bson.A {
	a := bson.A{}
	for _, k := range slices.Sorted(maps.Keys(h)) {
		a = append(a, bson.D{{Key: hName, Value: k}, {Key: hValues, Value: append([]string{}, h[k]...)}})
	}
	return a
}
