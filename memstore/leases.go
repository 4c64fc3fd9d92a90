package memstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/idemcheck"
)

// LeasesOptions configures a Leases. The zero value is ready to use. Every field documents
// its default.
type LeasesOptions struct {
	// Clock is the store's clock, the one an idem.Store takes from its server: each claim,
	// renewal and completion starts its lease or retention at Clock(), and each call judges
	// expiry by it when it reads a record. Default time.Now, which inside a testing/synctest
	// bubble is the bubble's clock.
	Clock func() time.Time
	// MaxBodyBytes bounds a stored response body as idem.Options.MaxBodyBytes does. Default
	// (0) 1 MiB. NewLeases panics when it is negative or past idem.MaxBodyLimit.
	MaxBodyBytes int
}

// Leases is a store of idempotency keys and leases in process memory, with the semantics of
// *idem.Store's ClaimAs, Complete, RenewAll, Release and List (see package idem): it
// implements relay.Leases. It is for tests, and for simulations in virtual time: it starts no
// goroutine, and decides expiry by LeasesOptions.Clock when a call reads a record. Create it
// with NewLeases. Every method is safe for concurrent use.
type Leases struct {
	clock   func() time.Time
	maxBody int

	// mu guards everything below. Every call holds it from its first read of a record to
	// its last write, so no other call's write lands in between.
	mu     sync.Mutex
	closed bool
	recs   map[string]*leaseRecord
	keys   []string // the keys of recs, sorted: List walks them
	swept  int      // len(recs) after the last sweep
}

// leaseRecord is one key's record as stored: its Lapsed is always false (a read sets it),
// and its Response belongs to the store.
type leaseRecord struct {
	rec   idem.Record
	token string
}

// NewLeases returns an empty Leases.
func NewLeases(opts LeasesOptions) *Leases {
	if opts.MaxBodyBytes < 0 || opts.MaxBodyBytes > idem.MaxBodyLimit {
		panic(fmt.Sprintf("memstore: LeasesOptions.MaxBodyBytes is %d, not between 0 and idem.MaxBodyLimit (%d)", opts.MaxBodyBytes, idem.MaxBodyLimit))
	}
	l := &Leases{clock: opts.Clock, maxBody: opts.MaxBodyBytes, recs: map[string]*leaseRecord{}}
	if l.clock == nil {
		l.clock = time.Now
	}
	return l
}

// ClaimAs claims key for lease as idem.Store.ClaimAs does. A record that is absent, a
// Completed one past its retention, or a Claimed one whose lease lapsed is taken, with a new
// token (New, or LeaseReclaimed for a lapsed claim). A live record is returned (AlreadyClaimed
// or AlreadyCompleted), with a *idem.FingerprintMismatchError when its fingerprint of the
// same version differs.
func (l *Leases) ClaimAs(ctx context.Context, key, fingerprint string, fingerprintVersion int, lease time.Duration, holder string) (idem.Claim, error) {
	if err := idemcheck.ClaimAs(key, fingerprint, lease, holder); err != nil {
		return idem.Claim{}, err
	}
	if err := l.lock(ctx); err != nil {
		return idem.Claim{}, err
	}
	defer l.mu.Unlock()
	now := l.clock()
	r := l.recs[key]
	if r != nil && !lapsed(r.rec.Until, now) {
		c := idem.Claim{Outcome: idem.AlreadyClaimed, Record: r.record(now)}
		if r.rec.State == idem.Completed {
			c.Outcome = idem.AlreadyCompleted
		}
		if r.rec.FingerprintVersion == fingerprintVersion && r.rec.Fingerprint != fingerprint {
			return c, &idem.FingerprintMismatchError{Key: key, Stored: r.rec.Fingerprint, Given: fingerprint, Version: fingerprintVersion}
		}
		return c, nil
	}
	out := idem.New
	if r != nil && r.rec.State == idem.Claimed {
		out = idem.LeaseReclaimed
	}
	if r == nil {
		l.insert(key, now)
	}
	r = &leaseRecord{token: newLeaseToken(), rec: idem.Record{
		Key: key, State: idem.Claimed, Fingerprint: fingerprint, FingerprintVersion: fingerprintVersion,
		ClaimedAt: atMillis(now), Until: until(now, lease), Holder: holder,
	}}
	l.recs[key] = r
	return idem.Claim{Outcome: out, Token: r.token, Record: r.record(now)}, nil
}

// Complete stores resp as key's response for retention, as idem.Store.Complete does, if key
// is still claimed with token, lapsed or not. False means the token was fenced (reclaimed,
// released or completed). The record keeps its holder, fingerprint and ClaimedAt.
func (l *Leases) Complete(ctx context.Context, key, token string, resp idem.Response, retention time.Duration) (bool, error) {
	if err := idemcheck.Complete(key, token, resp.Status, resp.Header, resp.Body, retention, l.maxBody); err != nil {
		return false, err
	}
	if err := l.lock(ctx); err != nil {
		return false, err
	}
	defer l.mu.Unlock()
	r := l.held(key, token)
	if r == nil {
		return false, nil
	}
	now := l.clock()
	r.rec.State = idem.Completed
	r.rec.CompletedAt = atMillis(now)
	r.rec.Until = until(now, retention)
	r.rec.Response = storedResponse(resp)
	return true, nil
}

// RenewAll extends each of claims' leases to lease from now, as idem.Store.RenewAll does:
// renewed[i] reports whether claims[i] was still claimed with its token (a lapsed claim no
// one reclaimed is renewed).
func (l *Leases) RenewAll(ctx context.Context, claims []idem.Held, lease time.Duration) ([]bool, error) {
	if err := idemcheck.RenewAll(claims, func(c idem.Held) (string, string) { return c.Key, c.Token }, lease); err != nil {
		return nil, err
	}
	if len(claims) == 0 {
		return []bool{}, nil
	}
	if err := l.lock(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	now := l.clock()
	renewed := make([]bool, len(claims))
	for i, c := range claims {
		if r := l.held(c.Key, c.Token); r != nil {
			r.rec.Until = until(now, lease)
			renewed[i] = true
		}
	}
	return renewed, nil
}

// Release deletes key's record if it is still claimed with token, as idem.Store.Release
// does, so that the next claim is New. False means the token was fenced.
func (l *Leases) Release(ctx context.Context, key, token string) (bool, error) {
	if err := idemcheck.Release(key, token); err != nil {
		return false, err
	}
	if err := l.lock(ctx); err != nil {
		return false, err
	}
	defer l.mu.Unlock()
	if l.held(key, token) == nil {
		return false, nil
	}
	l.remove(key)
	return true, nil
}

// List returns up to limit records whose key starts with prefix, in key order (limit 0: all
// of them), as idem.Store.List does: a claim past its lease has Lapsed set, and a completed
// record past its retention is left out.
func (l *Leases) List(ctx context.Context, prefix string, limit int) ([]idem.Record, error) {
	if err := idemcheck.List(prefix, limit); err != nil {
		return nil, err
	}
	if err := l.lock(ctx); err != nil {
		return nil, err
	}
	defer l.mu.Unlock()
	now := l.clock()
	var out []idem.Record
	i, _ := slices.BinarySearch(l.keys, prefix)
	for _, key := range l.keys[i:] {
		if !strings.HasPrefix(key, prefix) {
			break
		}
		if rec := l.recs[key].record(now); rec != nil {
			out = append(out, *rec)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out, nil
}

// Close makes every later call return execstore.ErrClosed, and drops the records. It never
// fails, and may be called again.
func (l *Leases) Close(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.closed = true
	l.recs, l.keys = nil, nil
	return nil
}

// lock takes the lock for a call made with ctx: ctx's error if ctx has ended (before or
// while waiting for the lock), ErrClosed once the store is closed. On nil the caller holds
// the lock and must unlock it.
func (l *Leases) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	l.mu.Lock()
	err := ctx.Err()
	if l.closed {
		err = execstore.ErrClosed
	}
	if err != nil {
		l.mu.Unlock()
	}
	return err
}

// held returns key's record if it is claimed with token, else nil.
func (l *Leases) held(key, token string) *leaseRecord {
	r := l.recs[key]
	if r == nil || r.rec.State != idem.Claimed || r.token != token {
		return nil
	}
	return r
}

// insert adds key, which has no record, to the sorted keys. Each time the store has doubled
// since the last sweep, it first deletes the completed records past their retention, which
// every call reads as absent: their memory is bounded, at a cost amortized over the claims.
func (l *Leases) insert(key string, now time.Time) {
	if len(l.recs) >= max(2*l.swept, minSweep) {
		for k, r := range l.recs {
			if r.rec.State == idem.Completed && lapsed(r.rec.Until, now) {
				delete(l.recs, k)
			}
		}
		l.keys = slices.DeleteFunc(l.keys, func(k string) bool { return l.recs[k] == nil })
		l.swept = len(l.recs)
	}
	i, _ := slices.BinarySearch(l.keys, key)
	l.keys = slices.Insert(l.keys, i, key)
}

// minSweep is the least number of records a sweep is made for.
const minSweep = 64

// remove deletes key's record.
func (l *Leases) remove(key string) {
	delete(l.recs, key)
	if i, ok := slices.BinarySearch(l.keys, key); ok {
		l.keys = slices.Delete(l.keys, i, i+1)
	}
}

// record is r as a read at now returns it, a copy: nil when it is completed and past its
// retention, Lapsed set when it is claimed and past its lease.
func (r *leaseRecord) record(now time.Time) *idem.Record {
	rec := r.rec
	rec.Lapsed = lapsed(rec.Until, now)
	if rec.Lapsed && rec.State == idem.Completed {
		return nil
	}
	if rec.Response != nil {
		rec.Response = storedResponse(*rec.Response)
	}
	return &rec
}

// lapsed reports whether until has come by now: a record's lease or retention ends at its
// Until.
func lapsed(until, now time.Time) bool { return !now.Before(until) }

// atMillis is now as a record holds it: in UTC, to the millisecond below, as BSON dates are.
func atMillis(now time.Time) time.Time { return now.Truncate(time.Millisecond).UTC() }

// until is when a lease or retention of d that starts at now ends: now rounded up to the
// millisecond, plus d rounded up to whole milliseconds, as an idem.Store computes it. It is
// never shorter than d.
func until(now time.Time, d time.Duration) time.Time {
	start := atMillis(now)
	if start.Before(now) {
		start = start.Add(time.Millisecond)
	}
	return start.Add((d + time.Millisecond - 1) / time.Millisecond * time.Millisecond)
}

// storedResponse is a copy of resp as an idem.Store reads it back: a header without values
// is dropped, and no header or body at all is nil.
func storedResponse(resp idem.Response) *idem.Response {
	out := &idem.Response{Status: resp.Status}
	if len(resp.Header) > 0 {
		out.Header = make(http.Header, len(resp.Header))
		for k, vs := range resp.Header {
			if len(vs) > 0 {
				out.Header[k] = slices.Clone(vs)
			}
		}
	}
	if len(resp.Body) > 0 {
		out.Body = slices.Clone(resp.Body)
	}
	return out
}

// newLeaseToken returns a fresh claim token, as an idem.Store's: 128 random bits in
// lowercase hex.
func newLeaseToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's documented contract)
	return hex.EncodeToString(b[:])
}
