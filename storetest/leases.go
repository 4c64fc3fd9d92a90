package storetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
)

// LeaseStore is a store of idempotency keys and leases as a relay uses one: the method set of
// relay.Leases, each call as package idem documents it for *idem.Store, and Close. Both
// *idem.Store and *memstore.Leases are LeaseStores.
type LeaseStore interface {
	ClaimAs(ctx context.Context, key, fingerprint string, fingerprintVersion int, lease time.Duration, holder string) (idem.Claim, error)
	Complete(ctx context.Context, key, token string, resp idem.Response, retention time.Duration) (bool, error)
	RenewAll(ctx context.Context, claims []idem.Held, lease time.Duration) ([]bool, error)
	Release(ctx context.Context, key, token string) (bool, error)
	List(ctx context.Context, prefix string, limit int) ([]idem.Record, error)
	Close(ctx context.Context) error
}

type leaseBehaviour struct {
	name  string
	check func(t *testing.T, s LeaseStore)
}

// leaseBehaviours lists what RunLeases checks.
var leaseBehaviours = []leaseBehaviour{
	{"ClaimOfAnAbsentKeyIsNew", leaseClaimNew},
	{"LiveClaimIsAlreadyClaimed", leaseClaimLive},
	{"FingerprintMismatchIsRefused", leaseFingerprintMismatch},
	{"CompleteStoresTheResponse", leaseComplete},
	{"ReleaseDeletesTheClaim", leaseRelease},
	{"LapsedClaimIsReclaimedAndFenced", leaseReclaim},
	{"LapsedClaimIsListedAndStillRenewable", leaseLapsedRenewable},
	{"CompletedPastItsRetentionIsAbsent", leaseRetentionEnds},
	{"RenewAllReportsEachClaim", leaseRenewAll},
	{"ListByPrefixInKeyOrder", leaseList},
	{"ConcurrentClaimsHaveOneWinner", leaseConcurrentClaims},
	{"RecordsAreCopies", leaseCopies},
	{"BadInputIsInvalid", leaseBadInput},
	{"EndedContextDoesNothing", leaseEndedContext},
	{"CloseRefusesLaterCalls", leaseClose},
}

// RunLeases checks a LeaseStore, each behaviour as a parallel subtest on a store of its own:
// the outcomes of a claim (New, LeaseReclaimed, AlreadyClaimed, AlreadyCompleted) and the
// record it returns (holder, fingerprint, ClaimedAt and Until by the store's clock), a
// fingerprint mismatch of the same version refused with a *idem.FingerprintMismatchError,
// Complete, RenewAll and Release acting only with the current token, a lapsed claim listed
// as Lapsed and renewable until it is reclaimed, a completed record absent once its
// retention ended, one winner of concurrent claims, listing by prefix in key order with a
// limit, copies in and out, bad input refused with execstore.ErrInvalid, an ended context's
// error, and execstore.ErrClosed after Close.
//
// open must return a new, empty store with its default settings (a response body of 1 MiB
// accepted, no more) each time it is called, from parallel subtests, and release it with
// t.Cleanup; RunLeases closes only the stores it checks Close with. Time is the store's: a
// behaviour that needs a lease or a retention to end gives it 1s and asks until the store
// shows it ended, for 10s at most. So the checks pass on a store whose clock is a server's
// (*idem.Store), and in a testing/synctest bubble they take no time (see CheckLeases).
func RunLeases(t *testing.T, open func(t *testing.T) LeaseStore) {
	t.Helper()
	for _, b := range leaseBehaviours {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			b.check(t, open(t))
		})
	}
}

// CheckLeases checks what RunLeases checks, one behaviour after the other on t itself,
// without subtests: for a testing/synctest bubble, where t.Run is not allowed. The first
// behaviour that fails the test ends it, and is named in the log.
func CheckLeases(t *testing.T, open func(t *testing.T) LeaseStore) {
	t.Helper()
	for _, b := range leaseBehaviours {
		func() {
			defer func() {
				if t.Failed() {
					t.Logf("storetest: in the lease behaviour %s", b.name)
				}
			}()
			b.check(t, open(t))
		}()
		if t.Failed() {
			return
		}
	}
}

// The leases and retentions the behaviours use: a live one outlasts any check, a short one
// ends within a check.
const (
	liveLease  = time.Minute
	shortLease = time.Second
	leaseFP    = "fp-1"
	// lapseWait bounds the wait for a short lease or retention to end, by the test's clock.
	lapseWait = 10 * time.Second
	// defaultMaxBody is idem.Options.MaxBodyBytes's default, the body a store with its
	// default settings accepts.
	defaultMaxBody = 1 << 20
)

// claimAs claims key with fingerprint leaseFP of version 1 and requires no error.
func claimAs(t *testing.T, s LeaseStore, key, holder string, lease time.Duration) idem.Claim {
	t.Helper()
	c, err := s.ClaimAs(bg, key, leaseFP, 1, lease, holder)
	require.NoError(t, err, "claim of %q", key)
	return c
}

// mustHold claims key and requires the claim to be New.
func mustHold(t *testing.T, s LeaseStore, key, holder string, lease time.Duration) idem.Claim {
	t.Helper()
	c := claimAs(t, s, key, holder, lease)
	require.Equal(t, idem.New, c.Outcome, "claim of the absent key %q", key)
	return c
}

// listed returns key's record as List returns it, nil when List leaves it out.
func listed(t *testing.T, s LeaseStore, key string) *idem.Record {
	t.Helper()
	recs, err := s.List(bg, key, 0)
	require.NoError(t, err)
	for _, r := range recs {
		if r.Key == key {
			return &r
		}
	}
	return nil
}

// waitFor asks done every 50ms until it holds, for lapseWait at most by the test's clock (a
// bubble's, in a testing/synctest bubble), and fails the test when it never does.
func waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(lapseWait)
	for !done() {
		if time.Now().After(deadline) {
			require.FailNow(t, "the store never showed it", "%s, within %v", what, lapseWait)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitLapsed waits until List shows key's claim as lapsed, and returns that record.
func waitLapsed(t *testing.T, s LeaseStore, key string) idem.Record {
	t.Helper()
	var rec *idem.Record
	waitFor(t, fmt.Sprintf("the claim of %q lapsed", key), func() bool {
		rec = listed(t, s, key)
		require.NotNil(t, rec, "a claim is listed until it is taken or released, lapsed or not")
		return rec.Lapsed
	})
	return *rec
}

// isToken reports whether token is one a claim hands out: 32 lowercase hex digits.
func isToken(token string) bool {
	return len(token) == 32 && strings.Trim(token, "0123456789abcdef") == ""
}

// checkSpan checks that a record's end is at least d after its start, and not past 2d: the
// store's clock starts the lease or retention, rounding it up by no more than d.
func checkSpan(t *testing.T, what string, start, end time.Time, d time.Duration) {
	t.Helper()
	assert.False(t, end.Before(start.Add(d)), "%s: ends at %v, less than %v after %v", what, end, d, start)
	assert.True(t, end.Before(start.Add(2*d)), "%s: ends at %v, %v or more after %v", what, end, 2*d, start)
}

// leaseClaimNew: a claim of an absent key is New, with a fresh token, and its record is the
// claimer's: Claimed, with its fingerprint, version and holder, live for the lease.
func leaseClaimNew(t *testing.T, s LeaseStore) {
	c, err := s.ClaimAs(bg, "k", "fp-a", 3, liveLease, "holder-a")
	require.NoError(t, err)
	assert.Equal(t, idem.New, c.Outcome)
	assert.True(t, c.Held())
	assert.True(t, isToken(c.Token), "token %q is 32 lowercase hex digits", c.Token)
	require.NotNil(t, c.Record)
	r := *c.Record
	assert.Equal(t, "k", r.Key)
	assert.Equal(t, idem.Claimed, r.State)
	assert.Equal(t, "fp-a", r.Fingerprint)
	assert.Equal(t, 3, r.FingerprintVersion)
	assert.Equal(t, "holder-a", r.Holder)
	assert.False(t, r.Lapsed)
	assert.False(t, r.ClaimedAt.IsZero())
	assert.True(t, r.CompletedAt.IsZero())
	assert.Nil(t, r.Response)
	checkSpan(t, "the lease", r.ClaimedAt, r.Until, liveLease)

	got := listed(t, s, "k")
	require.NotNil(t, got)
	assert.Equal(t, idem.Claimed, got.State)
	assert.Equal(t, "holder-a", got.Holder)
	assert.True(t, got.ClaimedAt.Equal(r.ClaimedAt), "listed ClaimedAt %v, claimed %v", got.ClaimedAt, r.ClaimedAt)
	assert.True(t, got.Until.Equal(r.Until), "listed Until %v, claimed %v", got.Until, r.Until)

	other := mustHold(t, s, "k2", "", liveLease)
	assert.NotEqual(t, c.Token, other.Token, "every claim has a token of its own")
	assert.Empty(t, other.Record.Holder, "a claim without a holder names none")
}

// leaseClaimLive: a claim of a key another claim holds is AlreadyClaimed, without a token,
// and returns that claim's record, whoever claims; a claimer's own second claim too.
func leaseClaimLive(t *testing.T, s LeaseStore) {
	first := mustHold(t, s, "k", "holder-a", liveLease)
	for _, holder := range []string{"holder-b", "holder-a"} {
		c := claimAs(t, s, "k", holder, liveLease)
		assert.Equal(t, idem.AlreadyClaimed, c.Outcome, "claim by %s", holder)
		assert.False(t, c.Held())
		assert.Empty(t, c.Token)
		require.NotNil(t, c.Record)
		assert.Equal(t, "holder-a", c.Record.Holder, "the record names the holder of its token")
		assert.Equal(t, idem.Claimed, c.Record.State)
		assert.False(t, c.Record.Lapsed)
		assert.True(t, c.Record.Until.Equal(first.Record.Until), "a claim that takes nothing changes nothing")
		assert.True(t, c.Record.ClaimedAt.Equal(first.Record.ClaimedAt))
	}
	ok, err := s.Complete(bg, "k", first.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "the first claim's token still holds the key")
}

// leaseFingerprintMismatch: a claim with another fingerprint of the same version is refused
// with a *idem.FingerprintMismatchError and the Claim found, claimed or completed; one of
// another version is taken to match.
func leaseFingerprintMismatch(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "k", "holder-a", liveLease)
	check := func(want idem.Outcome) {
		t.Helper()
		c, err := s.ClaimAs(bg, "k", "fp-other", 1, liveLease, "holder-b")
		var mm *idem.FingerprintMismatchError
		require.ErrorAs(t, err, &mm)
		assert.ErrorIs(t, err, idem.ErrFingerprintMismatch)
		assert.Equal(t, idem.FingerprintMismatchError{Key: "k", Stored: leaseFP, Given: "fp-other", Version: 1}, *mm)
		assert.Equal(t, want, c.Outcome)
		assert.Empty(t, c.Token)
		require.NotNil(t, c.Record)
		assert.Equal(t, leaseFP, c.Record.Fingerprint)

		c, err = s.ClaimAs(bg, "k", "fp-v2", 2, liveLease, "holder-b")
		require.NoError(t, err, "fingerprints of different versions are taken to match")
		assert.Equal(t, want, c.Outcome)
		assert.Empty(t, c.Token)
	}
	check(idem.AlreadyClaimed)
	ok, err := s.Complete(bg, "k", held.Token, idem.Response{Status: 201, Body: []byte("done")}, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	check(idem.AlreadyCompleted)
}

// leaseComplete: Complete with the current token stores the response for its retention;
// every later claim gets it back (AlreadyCompleted) with the claim's holder, fingerprint and
// ClaimedAt. Only the current token completes, once; a completed record is no longer
// renewed or released.
func leaseComplete(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "k", "holder-a", liveLease)
	stranger := strings.Repeat("0", 32)
	for _, c := range []struct{ key, token string }{{"k", stranger}, {"absent", held.Token}} {
		ok, err := s.Complete(bg, c.key, c.token, idem.Response{Status: 200}, time.Hour)
		require.NoError(t, err)
		assert.False(t, ok, "Complete of %q with a token that does not hold it", c.key)
	}
	resp := idem.Response{Status: 201, Header: http.Header{"Content-Type": {"text/plain"}, "X-Many": {"1", "2"}}, Body: []byte("created")}
	ok, err := s.Complete(bg, "k", held.Token, resp, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)

	c := claimAs(t, s, "k", "holder-b", liveLease)
	assert.Equal(t, idem.AlreadyCompleted, c.Outcome)
	assert.Empty(t, c.Token)
	require.NotNil(t, c.Record)
	r := *c.Record
	assert.Equal(t, idem.Completed, r.State)
	require.NotNil(t, r.Response)
	assert.Equal(t, resp, *r.Response)
	assert.Equal(t, "holder-a", r.Holder, "Complete keeps the holder")
	assert.Equal(t, leaseFP, r.Fingerprint)
	assert.True(t, r.ClaimedAt.Equal(held.Record.ClaimedAt), "Complete keeps ClaimedAt")
	assert.False(t, r.CompletedAt.Before(r.ClaimedAt))
	assert.False(t, r.Lapsed)
	checkSpan(t, "the retention", r.CompletedAt, r.Until, time.Hour)
	got := listed(t, s, "k")
	require.NotNil(t, got)
	assert.Equal(t, r, *got, "List returns the record a claim finds")

	ok, err = s.Complete(bg, "k", held.Token, idem.Response{Status: 500}, time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "a key completes once")
	renewed, err := s.RenewAll(bg, []idem.Held{{Key: "k", Token: held.Token}}, liveLease)
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, renewed, "a completed record is not renewed")
	ok, err = s.Release(bg, "k", held.Token)
	require.NoError(t, err)
	assert.False(t, ok, "a completed record is not released")
	got = listed(t, s, "k")
	require.NotNil(t, got)
	assert.Equal(t, r, *got, "nothing changed the completed record")

	empty := mustHold(t, s, "k-empty", "", liveLease)
	ok, err = s.Complete(bg, "k-empty", empty.Token, idem.Response{Status: 204}, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	got = listed(t, s, "k-empty")
	require.NotNil(t, got)
	require.NotNil(t, got.Response)
	assert.Equal(t, 204, got.Response.Status)
	assert.Empty(t, got.Response.Header)
	assert.Empty(t, got.Response.Body)
}

// leaseRelease: Release with the current token deletes the record, so that the next claim
// is New; a stranger's token, or the token once released, releases nothing.
func leaseRelease(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "k", "holder-a", liveLease)
	ok, err := s.Release(bg, "k", strings.Repeat("0", 32))
	require.NoError(t, err)
	assert.False(t, ok, "a stranger's token releases nothing")
	require.NotNil(t, listed(t, s, "k"))

	ok, err = s.Release(bg, "k", held.Token)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Nil(t, listed(t, s, "k"), "a released claim leaves no record")
	ok, err = s.Release(bg, "k", held.Token)
	require.NoError(t, err)
	assert.False(t, ok, "a token releases once")

	again := mustHold(t, s, "k", "holder-b", liveLease)
	assert.NotEqual(t, held.Token, again.Token)
	ok, err = s.Complete(bg, "k", held.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "the released token is fenced")
	renewed, err := s.RenewAll(bg, []idem.Held{{Key: "k", Token: held.Token}}, liveLease)
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, renewed)
	ok, err = s.Release(bg, "k", held.Token)
	require.NoError(t, err)
	assert.False(t, ok)
	got := listed(t, s, "k")
	require.NotNil(t, got)
	assert.Equal(t, "holder-b", got.Holder, "the new claim stands")
}

// leaseReclaim: once a claim's lease lapsed by the store's clock, the next claim reclaims it
// (LeaseReclaimed) with a new token, whatever its fingerprint, and names its own holder; the
// old token is fenced: it completes, renews and releases nothing.
func leaseReclaim(t *testing.T, s LeaseStore) {
	old := mustHold(t, s, "k", "holder-a", shortLease)
	var c idem.Claim
	waitFor(t, "the short lease lapsed", func() bool {
		var err error
		c, err = s.ClaimAs(bg, "k", "fp-other", 1, liveLease, "holder-b")
		if c.Outcome == idem.AlreadyClaimed && errors.Is(err, idem.ErrFingerprintMismatch) {
			return false // still live: the fingerprints are compared
		}
		require.NoError(t, err, "a lapsed claim's fingerprint is not compared")
		return true
	})
	assert.Equal(t, idem.LeaseReclaimed, c.Outcome)
	assert.True(t, c.Held())
	assert.True(t, isToken(c.Token))
	assert.NotEqual(t, old.Token, c.Token)
	require.NotNil(t, c.Record)
	assert.Equal(t, "holder-b", c.Record.Holder, "the reclaim names its own holder")
	assert.Equal(t, "fp-other", c.Record.Fingerprint)
	assert.False(t, c.Record.Lapsed)
	assert.False(t, c.Record.ClaimedAt.Before(old.Record.Until),
		"reclaimed at %v, before the old lease's end %v", c.Record.ClaimedAt, old.Record.Until)
	checkSpan(t, "the new lease", c.Record.ClaimedAt, c.Record.Until, liveLease)

	ok, err := s.Complete(bg, "k", old.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "the reclaimed token completes nothing")
	renewed, err := s.RenewAll(bg, []idem.Held{{Key: "k", Token: old.Token}}, liveLease)
	require.NoError(t, err)
	assert.Equal(t, []bool{false}, renewed, "the reclaimed token renews nothing")
	ok, err = s.Release(bg, "k", old.Token)
	require.NoError(t, err)
	assert.False(t, ok, "the reclaimed token releases nothing")
	got := listed(t, s, "k")
	require.NotNil(t, got)
	assert.Equal(t, "holder-b", got.Holder)
	assert.True(t, got.Until.Equal(c.Record.Until), "the fenced calls changed nothing")

	ok, err = s.Complete(bg, "k", c.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "the new token holds the key")
}

// leaseLapsedRenewable: a lapsed claim no one reclaimed is listed with Lapsed set, still
// Claimed; its token still renews it (from the store's now, so it is live again) and then
// completes it.
func leaseLapsedRenewable(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "k", "holder-a", shortLease)
	rec := waitLapsed(t, s, "k")
	assert.Equal(t, idem.Claimed, rec.State)
	assert.Equal(t, "holder-a", rec.Holder)
	assert.True(t, rec.Until.Equal(held.Record.Until))

	renewed, err := s.RenewAll(bg, []idem.Held{{Key: "k", Token: held.Token}}, liveLease)
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, renewed, "a lapsed claim no one reclaimed is renewed")
	got := listed(t, s, "k")
	require.NotNil(t, got)
	assert.False(t, got.Lapsed, "the renewal made it live again")
	assert.False(t, got.Until.Before(rec.Until.Add(liveLease)), "renewed to %v, less than %v past the lapsed end %v", got.Until, liveLease, rec.Until)
	c := claimAs(t, s, "k", "holder-b", liveLease)
	assert.Equal(t, idem.AlreadyClaimed, c.Outcome)

	// A claim made after the renewal lapses, while the renewed one stays live: the renewal
	// counts from the store's now, not from the lease's first end.
	mustHold(t, s, "k2", "holder-a", shortLease)
	waitLapsed(t, s, "k2")
	c = claimAs(t, s, "k", "holder-b", liveLease)
	assert.Equal(t, idem.AlreadyClaimed, c.Outcome, "the renewed claim is live")

	ok, err := s.Complete(bg, "k", held.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	assert.True(t, ok)
}

// leaseRetentionEnds: a completed record past its retention reads as absent: List leaves it
// out, and the next claim is New (not LeaseReclaimed).
func leaseRetentionEnds(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "k", "holder-a", liveLease)
	ok, err := s.Complete(bg, "k", held.Token, idem.Response{Status: 200, Body: []byte("old")}, shortLease)
	require.NoError(t, err)
	require.True(t, ok)
	waitFor(t, "the completed record's retention ended", func() bool { return listed(t, s, "k") == nil })
	var c idem.Claim
	waitFor(t, "a claim found the retention ended", func() bool {
		c = claimAs(t, s, "k", "holder-b", liveLease)
		return c.Outcome != idem.AlreadyCompleted
	})
	assert.Equal(t, idem.New, c.Outcome)
	require.NotNil(t, c.Record)
	assert.Equal(t, idem.Claimed, c.Record.State)
	assert.Nil(t, c.Record.Response)
	assert.Equal(t, "holder-b", c.Record.Holder)
	ok, err = s.Complete(bg, "k", held.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "the first claim's token is fenced")
}

// leaseRenewAll: RenewAll renews each claim still claimed with its token, from the store's
// now, and reports each in the order given: a claim released, fenced, completed or never
// made is false; the same claim twice is true twice. No claims is an empty answer.
func leaseRenewAll(t *testing.T, s LeaseStore) {
	a := mustHold(t, s, "a", "h", liveLease)
	b := mustHold(t, s, "b", "h", liveLease)
	released := mustHold(t, s, "c", "h", liveLease)
	completed := mustHold(t, s, "d", "h", liveLease)
	ok, err := s.Release(bg, "c", released.Token)
	require.NoError(t, err)
	require.True(t, ok)
	ok, err = s.Complete(bg, "d", completed.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)

	const longer = 10 * liveLease
	renewed, err := s.RenewAll(bg, []idem.Held{
		{Key: "b", Token: b.Token},
		{Key: "c", Token: released.Token},
		{Key: "a", Token: b.Token}, // b's token is not a's
		{Key: "d", Token: completed.Token},
		{Key: "a", Token: a.Token},
		{Key: "never", Token: a.Token},
		{Key: "b", Token: b.Token},
	}, longer)
	require.NoError(t, err)
	assert.Equal(t, []bool{true, false, false, false, true, false, true}, renewed)
	for _, h := range []idem.Claim{a, b} {
		got := listed(t, s, h.Record.Key)
		require.NotNil(t, got)
		assert.False(t, got.Until.Before(h.Record.ClaimedAt.Add(longer)), "%s renewed to %v, less than %v after its claim at %v",
			h.Record.Key, got.Until, longer, h.Record.ClaimedAt)
		assert.True(t, got.ClaimedAt.Equal(h.Record.ClaimedAt), "a renewal keeps ClaimedAt")
		assert.Equal(t, "h", got.Holder)
	}
	assert.Nil(t, listed(t, s, "c"), "a renewal recreates no record")
	assert.Nil(t, listed(t, s, "never"))
	got := listed(t, s, "d")
	require.NotNil(t, got)
	assert.Equal(t, idem.Completed, got.State)

	none, err := s.RenewAll(bg, nil, liveLease)
	require.NoError(t, err)
	assert.NotNil(t, none)
	assert.Empty(t, none)
}

// leaseList: List returns the records whose key starts with the prefix, in key order, up to
// the limit (0: all), claimed and completed alike, each as a claim would find it.
func leaseList(t *testing.T, s LeaseStore) {
	for _, k := range []string{"m/2", "m/10", "m", "n/1", "m/1", "l/1", "m/3"} {
		mustHold(t, s, k, "holder-"+k, liveLease)
	}
	done := mustHold(t, s, "m/4", "holder-m/4", liveLease)
	ok, err := s.Complete(bg, "m/4", done.Token, idem.Response{Status: 200, Body: []byte("4")}, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)

	keys := func(prefix string, limit int) []string {
		t.Helper()
		recs, err := s.List(bg, prefix, limit)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			assert.Equal(t, "holder-"+r.Key, r.Holder)
			assert.False(t, r.Lapsed)
			out = append(out, r.Key)
		}
		return out
	}
	assert.Equal(t, []string{"m/1", "m/10", "m/2", "m/3", "m/4"}, keys("m/", 0))
	assert.Equal(t, []string{"m", "m/1", "m/10", "m/2", "m/3", "m/4"}, keys("m", 0))
	assert.Equal(t, []string{"m/1", "m/10"}, keys("m/", 2))
	assert.Equal(t, []string{"m/1", "m/10", "m/2", "m/3", "m/4"}, keys("m/", 5))
	assert.Equal(t, []string{"m/1", "m/10", "m/2", "m/3", "m/4"}, keys("m/", 100))
	assert.Equal(t, []string{"m/1", "m/10"}, keys("m/1", 0))
	assert.Empty(t, keys("o", 0))
	assert.Empty(t, keys("m/5", 0))

	recs, err := s.List(bg, "m/4", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, idem.Completed, recs[0].State)
	require.NotNil(t, recs[0].Response)
	assert.Equal(t, []byte("4"), recs[0].Response.Body)
}

// leaseConcurrentClaims: of concurrent claims of an absent key exactly one is New, and of
// concurrent claims of a lapsed one exactly one is LeaseReclaimed, fencing the lapsed claim;
// every other finds the winner's claim.
func leaseConcurrentClaims(t *testing.T, s LeaseStore) {
	const n = 8
	race := func(key string, lease time.Duration) (winner idem.Claim, holder string) {
		t.Helper()
		claims := make([]idem.Claim, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				claims[i], errs[i] = s.ClaimAs(bg, key, leaseFP, 1, lease, fmt.Sprintf("holder-%d", i))
			})
		}
		wg.Wait()
		won := 0
		for i, c := range claims {
			require.NoError(t, errs[i])
			if c.Held() {
				won++
				winner, holder = c, fmt.Sprintf("holder-%d", i)
			}
		}
		require.Equal(t, 1, won, "claims that got a token")
		for _, c := range claims {
			if !c.Held() {
				assert.Equal(t, idem.AlreadyClaimed, c.Outcome)
				require.NotNil(t, c.Record)
				assert.Equal(t, holder, c.Record.Holder, "a loser finds the winner's claim")
			}
		}
		got := listed(t, s, key)
		require.NotNil(t, got)
		assert.Equal(t, holder, got.Holder)
		return winner, holder
	}
	// The racers claim for a long lease: with a short one, a racer a busy machine delays past
	// it takes the lapsed claim, rightly, and there are two winners.
	first, _ := race("k", liveLease)
	assert.Equal(t, idem.New, first.Outcome)
	short := mustHold(t, s, "lapsing", "holder-short", shortLease)
	waitLapsed(t, s, "lapsing")
	second, _ := race("lapsing", liveLease)
	assert.Equal(t, idem.LeaseReclaimed, second.Outcome)
	ok, err := s.Complete(bg, "lapsing", short.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	assert.False(t, ok, "the lapsed claim's token is fenced")
}

// leaseCopies: the store keeps no caller's slice or map, and hands out none of its own.
func leaseCopies(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "k", "holder-a", liveLease)
	resp := idem.Response{Status: 200, Header: http.Header{"X-A": {"1"}}, Body: []byte("body")}
	ok, err := s.Complete(bg, "k", held.Token, resp, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	resp.Header["X-A"][0] = "changed"
	resp.Header["X-B"] = []string{"added"}
	resp.Body[0] = 'B'

	want := idem.Response{Status: 200, Header: http.Header{"X-A": {"1"}}, Body: []byte("body")}
	c := claimAs(t, s, "k", "holder-b", liveLease)
	require.NotNil(t, c.Record)
	require.NotNil(t, c.Record.Response)
	assert.Equal(t, want, *c.Record.Response, "the caller's response was copied in")
	c.Record.Response.Header["X-A"][0] = "changed"
	c.Record.Response.Body[0] = 'B'
	recs, err := s.List(bg, "k", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	require.NotNil(t, recs[0].Response)
	assert.Equal(t, want, *recs[0].Response, "a claim's record is a copy")
	recs[0].Response.Header["X-A"] = nil
	recs[0].Response.Body[1] = 'O'
	got := listed(t, s, "k")
	require.NotNil(t, got)
	require.NotNil(t, got.Response)
	assert.Equal(t, want, *got.Response, "a listed record is a copy")
}

// leaseBadInput: every input an idem.Store refuses is refused with execstore.ErrInvalid (an
// *execstore.InvalidError), and changes nothing.
func leaseBadInput(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "held", "holder-a", liveLease)
	token := held.Token
	longKey := strings.Repeat("k", execstore.MaxIDBytes+1)
	ok200 := idem.Response{Status: 200}
	claim := func(key, fingerprint string, lease time.Duration, holder string) error {
		_, err := s.ClaimAs(bg, key, fingerprint, 1, lease, holder)
		return err
	}
	complete := func(key, tok string, resp idem.Response, retention time.Duration) error {
		_, err := s.Complete(bg, key, tok, resp, retention)
		return err
	}
	renew := func(lease time.Duration, claims ...idem.Held) error {
		_, err := s.RenewAll(bg, claims, lease)
		return err
	}
	release := func(key, tok string) error {
		_, err := s.Release(bg, key, tok)
		return err
	}
	list := func(prefix string, limit int) error {
		_, err := s.List(bg, prefix, limit)
		return err
	}
	bigBody := idem.Response{Status: 200, Body: make([]byte, defaultMaxBody+1)}
	bigHeader := idem.Response{Status: 200, Header: http.Header{"X-Big": {strings.Repeat("v", 256<<10)}}}
	for _, c := range []struct {
		name string
		err  error
	}{
		{"claim: empty key", claim("", leaseFP, liveLease, "")},
		{"claim: oversized key", claim(longKey, leaseFP, liveLease, "")},
		{"claim: key not UTF-8", claim("bad\xff", leaseFP, liveLease, "")},
		{"claim: key with a NUL byte", claim("bad\x00", leaseFP, liveLease, "")},
		{"claim: oversized fingerprint", claim("bad", strings.Repeat("f", idem.MaxFingerprintBytes+1), liveLease, "")},
		{"claim: zero lease", claim("bad", leaseFP, 0, "")},
		{"claim: lease under 1ms", claim("bad", leaseFP, time.Millisecond-1, "")},
		{"claim: negative lease", claim("bad", leaseFP, -time.Second, "")},
		{"claim: oversized holder", claim("bad", leaseFP, liveLease, strings.Repeat("h", idem.MaxHolderBytes+1))},
		{"claim: holder not UTF-8", claim("bad", leaseFP, liveLease, "h\xff")},
		{"complete: empty key", complete("", token, ok200, time.Hour)},
		{"complete: empty token", complete("held", "", ok200, time.Hour)},
		{"complete: short token", complete("held", token[1:], ok200, time.Hour)},
		{"complete: uppercase token", complete("held", strings.ToUpper(token), ok200, time.Hour)},
		{"complete: zero retention", complete("held", token, ok200, 0)},
		{"complete: status 99", complete("held", token, idem.Response{Status: 99}, time.Hour)},
		{"complete: status 1000", complete("held", token, idem.Response{Status: 1000}, time.Hour)},
		{"complete: body past 1 MiB", complete("held", token, bigBody, time.Hour)},
		{"complete: headers past 256 KiB", complete("held", token, bigHeader, time.Hour)},
		{"renew: empty key", renew(liveLease, idem.Held{Key: "", Token: token})},
		{"renew: one bad token", renew(liveLease, idem.Held{Key: "held", Token: token}, idem.Held{Key: "held", Token: "x"})},
		{"renew: zero lease", renew(0, idem.Held{Key: "held", Token: token})},
		{"renew: no claims, zero lease", renew(0)},
		{"release: empty key", release("", token)},
		{"release: bad token", release("held", "not-a-token")},
		{"list: empty prefix", list("", 0)},
		{"list: oversized prefix", list(longKey, 0)},
		{"list: negative limit", list("held", -1)},
	} {
		require.ErrorIs(t, c.err, execstore.ErrInvalid, c.name)
		var ie *execstore.InvalidError
		assert.ErrorAs(t, c.err, &ie, c.name)
	}
	recs, err := s.List(bg, "bad", 0)
	require.NoError(t, err)
	assert.Empty(t, recs, "a refused claim writes nothing")
	got := listed(t, s, "held")
	require.NotNil(t, got)
	assert.Equal(t, idem.Claimed, got.State, "a refused complete or release writes nothing")
	assert.True(t, got.Until.Equal(held.Record.Until), "a refused renewal writes nothing")
	body := idem.Response{Status: 200, Body: make([]byte, defaultMaxBody)}
	ok, err := s.Complete(bg, "held", token, body, time.Hour)
	require.NoError(t, err, "a body of 1 MiB is accepted")
	assert.True(t, ok)
}

// leaseEndedContext: a call whose context has ended returns the context's error and does
// nothing.
func leaseEndedContext(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "held", "holder-a", liveLease)
	cancelled, cancel := context.WithCancel(bg)
	cancel()
	expired, cancel2 := context.WithDeadline(bg, time.Now().Add(-time.Second))
	defer cancel2()
	for _, c := range []struct {
		ctx  context.Context
		want error
	}{{cancelled, context.Canceled}, {expired, context.DeadlineExceeded}} {
		_, err := s.ClaimAs(c.ctx, "new", leaseFP, 1, liveLease, "holder-b")
		assert.ErrorIs(t, err, c.want, "ClaimAs")
		_, err = s.ClaimAs(c.ctx, "held", leaseFP, 1, liveLease, "holder-b")
		assert.ErrorIs(t, err, c.want, "ClaimAs of a held key")
		_, err = s.Complete(c.ctx, "held", held.Token, idem.Response{Status: 200}, time.Hour)
		assert.ErrorIs(t, err, c.want, "Complete")
		_, err = s.RenewAll(c.ctx, []idem.Held{{Key: "held", Token: held.Token}}, 10*liveLease)
		assert.ErrorIs(t, err, c.want, "RenewAll")
		_, err = s.Release(c.ctx, "held", held.Token)
		assert.ErrorIs(t, err, c.want, "Release")
		_, err = s.List(c.ctx, "held", 0)
		assert.ErrorIs(t, err, c.want, "List")
	}
	assert.Nil(t, listed(t, s, "new"), "no claim was made")
	got := listed(t, s, "held")
	require.NotNil(t, got)
	assert.Equal(t, idem.Claimed, got.State, "not completed, not released")
	assert.True(t, got.Until.Equal(held.Record.Until), "not renewed")
	ok, err := s.Complete(bg, "held", held.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	assert.True(t, ok, "the claim still holds")
}

// leaseClose: after Close every call returns execstore.ErrClosed, bad input still
// execstore.ErrInvalid; Close again returns nil.
func leaseClose(t *testing.T, s LeaseStore) {
	held := mustHold(t, s, "held", "holder-a", liveLease)
	require.NoError(t, s.Close(bg))
	_, err := s.ClaimAs(bg, "new", leaseFP, 1, liveLease, "")
	assert.ErrorIs(t, err, execstore.ErrClosed, "ClaimAs")
	_, err = s.Complete(bg, "held", held.Token, idem.Response{Status: 200}, time.Hour)
	assert.ErrorIs(t, err, execstore.ErrClosed, "Complete")
	_, err = s.RenewAll(bg, []idem.Held{{Key: "held", Token: held.Token}}, liveLease)
	assert.ErrorIs(t, err, execstore.ErrClosed, "RenewAll")
	_, err = s.Release(bg, "held", held.Token)
	assert.ErrorIs(t, err, execstore.ErrClosed, "Release")
	_, err = s.List(bg, "held", 0)
	assert.ErrorIs(t, err, execstore.ErrClosed, "List")
	_, err = s.ClaimAs(bg, "", leaseFP, 1, liveLease, "")
	assert.ErrorIs(t, err, execstore.ErrInvalid, "bad input is refused as such first")
	assert.False(t, errors.Is(err, execstore.ErrClosed))
	assert.NoError(t, s.Close(bg), "a second Close")
}
