package idem

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/execstore/execstore"
)

// Header names of draft-ietf-httpapi-idempotency-key-header-07, and of the replay mark.
const (
	HeaderKey      = "Idempotency-Key"
	HeaderReplayed = "Idempotent-Replayed"
)

// The defaults of MiddlewareOptions, as its fields document them.
const (
	defaultMaxRequestBytes = 1 << 20
	defaultRetryAfter      = time.Second
)

// MiddlewareOptions configures Store.Middleware. The zero value is ready to use. The lease,
// the retention, the fingerprint version and how long a retry waits for a running first
// request are the store's (Options.Lease, Retention, FingerprintVersion, WaitTimeout).
type MiddlewareOptions struct {
	// Methods are the methods the middleware applies to; others pass through untouched.
	// Default POST and PATCH (the draft's non-idempotent methods).
	Methods []string
	// Required makes a request without an Idempotency-Key a 400. Default false: it passes
	// through without idempotency.
	Required bool
	// Fingerprint identifies a request, so that a key reused for a different one is a 422.
	// Default DefaultFingerprint: method, path and body.
	Fingerprint func(r *http.Request, body []byte) string
	// MaxRequestBytes bounds the request body the middleware reads to fingerprint it;
	// a larger one is a 413. Default 1 MiB.
	MaxRequestBytes int64
	// RetryAfter is the Retry-After of a 409 (the first request still runs) and of a 503.
	// Default 1s.
	RetryAfter time.Duration
	// FailOpen runs the handler without idempotency when the store fails before it ran.
	// Default false: fail closed with a 503.
	FailOpen bool
}

func (o MiddlewareOptions) withDefaults() MiddlewareOptions {
	if len(o.Methods) == 0 {
		o.Methods = []string{http.MethodPost, http.MethodPatch}
	}
	if o.Fingerprint == nil {
		o.Fingerprint = DefaultFingerprint
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = defaultMaxRequestBytes
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = defaultRetryAfter
	}
	return o
}

// DefaultFingerprint is the SHA-256 of the request's method, path and body.
func DefaultFingerprint(r *http.Request, body []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n", r.Method, r.URL.Path)
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// errNotStored carries a response that ran but must not be stored (a 5xx): Do releases
// the claim so that a retry runs the handler again.
type errNotStored struct{ resp Response }

func (errNotStored) Error() string { return "idem: response not stored" }

// Middleware makes a handler idempotent by the request's Idempotency-Key header
// (draft-ietf-httpapi-idempotency-key-header-07), with Do. As Do's function, the handler
// runs at most once at a time per key, and again after its runner died or stalled past the
// lease before the response was stored:
//
//   - the first request with a key runs the handler; its response is stored (unless it is a
//     5xx: the claim is then released, so a retry runs again) and sent;
//   - a later request with the key and the same fingerprint gets the stored status, headers
//     and body, with Idempotent-Replayed: true, and the handler does not run;
//   - a retry while the first request still runs waits for it up to Options.WaitTimeout,
//     then gets 409 Conflict with Retry-After;
//   - a key reused for a different request (another fingerprint) gets 422;
//   - a missing key gets 400 when MiddlewareOptions.Required, a malformed one always;
//   - a store failure before the handler ran gets 503 with Retry-After, or with FailOpen runs
//     the handler without idempotency. A response whose storing failed is still sent.
//
// The key is an sf-string ("…"); a bare value is accepted too, of at most
// MaxClientKeyBytes. The handler reads it parsed (unquoted, unescaped) with KeyFromContext on
// the request's context. A request the middleware passes through without a key (another
// method, or no Idempotency-Key when not Required) carries none. A handler that FailOpen runs
// without idempotency still gets it.
//
// Nothing a request sends reaches another user's record. The middleware stores a key k as
// Do does, under ClientKey(k) (ClientPrefix+k), whatever k holds: a key that spells a
// relay's lease key ("execstore/relay/outbox/partitions/3") is stored as
// "client/execstore/relay/outbox/partitions/3", which no relay claims (package relay refuses
// an Options.LeaseKey under ClientPrefix). So one Store may serve the middleware and be the
// relays' Options.Lease: no header can create, take, complete or block a relay's lease, nor
// read one back. The fingerprint and the body are stored in the client's record only.
func (s *Store) Middleware(opts MiddlewareOptions) func(http.Handler) http.Handler {
	opts = opts.withDefaults()
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !slices.Contains(opts.Methods, r.Method) {
				next.ServeHTTP(w, r)
				return
			}
			raw := r.Header.Get(HeaderKey)
			if raw == "" {
				if opts.Required {
					http.Error(w, "Idempotency-Key header required", http.StatusBadRequest)
					return
				}
				next.ServeHTTP(w, r)
				return
			}
			key, ok := parseKey(raw)
			if !ok || validateClientKey(key) != nil {
				http.Error(w, "malformed Idempotency-Key", http.StatusBadRequest)
				return
			}
			r = r.WithContext(context.WithValue(r.Context(), keyContextKey{}, key))
			body, err := io.ReadAll(io.LimitReader(r.Body, opts.MaxRequestBytes+1))
			if err != nil {
				http.Error(w, "reading the request body failed", http.StatusBadRequest)
				return
			}
			if int64(len(body)) > opts.MaxRequestBytes {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			ran := false
			res, err := s.Do(r.Context(), key, opts.Fingerprint(r, body), func(ctx context.Context) (Response, error) {
				ran = true
				rec := &capture{header: http.Header{}}
				next.ServeHTTP(rec, r.WithContext(ctx))
				resp := rec.response()
				if resp.Status >= 500 {
					return resp, errNotStored{resp}
				}
				return resp, nil
			})
			var notStored errNotStored
			switch {
			case err == nil:
				writeResponse(w, res.Response, res.Replayed)
			case errors.As(err, &notStored):
				writeResponse(w, notStored.resp, false)
			case ran && res.Response.Status != 0:
				writeResponse(w, res.Response, false) // it ran; storing it failed
			case errors.Is(err, ErrFingerprintMismatch):
				http.Error(w, "Idempotency-Key reused with a different request", http.StatusUnprocessableEntity)
			case errors.Is(err, ErrInProgress):
				w.Header().Set("Retry-After", retryAfter(opts.RetryAfter))
				http.Error(w, "a request with this Idempotency-Key is in progress", http.StatusConflict)
			case ran || r.Context().Err() != nil:
				// The handler failed without a response, or the client went away.
			case opts.FailOpen && !errors.Is(err, execstore.ErrInvalid):
				next.ServeHTTP(w, r)
			default:
				w.Header().Set("Retry-After", retryAfter(opts.RetryAfter))
				http.Error(w, "idempotency store unavailable", http.StatusServiceUnavailable)
			}
		})
	}
}

// keyContextKey is the context key under which Middleware puts the parsed Idempotency-Key.
type keyContextKey struct{}

// KeyFromContext returns the Idempotency-Key that Middleware parsed from the request whose
// context ctx is (or derives from), and whether there is one. It is false for a request
// the middleware passed through without a key, and for any context the middleware did
// not set.
func KeyFromContext(ctx context.Context) (string, bool) {
	key, ok := ctx.Value(keyContextKey{}).(string)
	return key, ok
}

func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int((d+time.Second-1)/time.Second)))
}

// parseKey reads an Idempotency-Key: an RFC 8941 sf-string, or a bare value.
func parseKey(v string) (string, bool) {
	v = strings.TrimSpace(v)
	if len(v) < 2 || v[0] != '"' {
		return v, !strings.ContainsAny(v, "\"\\")
	}
	if v[len(v)-1] != '"' {
		return "", false
	}
	var b strings.Builder
	inner := v[1 : len(v)-1]
	for i := 0; i < len(inner); i++ {
		c := inner[i]
		switch {
		case c == '\\':
			i++
			if i == len(inner) || (inner[i] != '"' && inner[i] != '\\') {
				return "", false
			}
			b.WriteByte(inner[i])
		case c == '"' || c < 0x20 || c > 0x7e:
			return "", false
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), b.Len() > 0
}

// writeResponse sends resp, marked as a replay when replayed.
func writeResponse(w http.ResponseWriter, resp Response, replayed bool) {
	h := w.Header()
	maps.Copy(h, resp.Header)
	if replayed {
		h.Set(HeaderReplayed, "true")
	}
	w.WriteHeader(resp.Status)
	_, _ = w.Write(resp.Body)
}

// capture is the ResponseWriter the handler writes to: everything is kept, to be stored
// and then sent.
type capture struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

func (c *capture) Write(b []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	return c.body.Write(b)
}

func (c *capture) response() Response {
	resp := Response{Status: c.status, Header: c.header.Clone(), Body: c.body.Bytes()}
	if resp.Status == 0 {
		resp.Status = http.StatusOK
	}
	if len(resp.Header) == 0 {
		resp.Header = nil
	}
	return resp
}
