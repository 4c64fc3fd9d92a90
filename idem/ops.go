package idem

import (
	"context"
	"time"

	"github.com/execstore/execstore/internal/idemcheck"
)

// Claim claims key for lease, for the request with fingerprint (of the given fingerprint
// version). See Outcome for what it can find. A fingerprint that differs from the stored one
// of the same version returns the Claim found with a *FingerprintMismatchError.
//
// Cost: with the MongoDB formulation, one findAndModify (two when it takes over an unreadable
// record). With the FerretDB one, a find and a guarded write, plus a reading of the server's
// clock when the last one is stale.
//
// An unanswered claim is settled by reading its token (chosen before sending) back. A claim
// that landed is reported as such, with Settled set. Otherwise the error matches
// execstore.ErrOutcomeUnknown. Then claim again: a claim that landed is then AlreadyClaimed
// under a token no one holds, and is reclaimed once its lease lapses.
func (s *Store) Claim(ctx context.Context, key, fingerprint string, fingerprintVersion int, lease time.Duration) (Claim, error) {
	return s.ClaimAs(ctx, key, fingerprint, fingerprintVersion, lease, "")
}

// ClaimAs is Claim that names the claimer: a claim that takes the record stores holder as
// its Holder, which Get and List return to anyone (a holder is not a secret, and proves
// nothing). A claim that takes a record from another holder replaces that holder's name;
// Complete keeps it. A holder longer than MaxHolderBytes, or not valid UTF-8, is
// execstore.ErrInvalid before any I/O. It costs what Claim costs.
func (s *Store) ClaimAs(ctx context.Context, key, fingerprint string, fingerprintVersion int, lease time.Duration, holder string) (Claim, error) {
	if err := idemcheck.Claim(key, fingerprint, lease); err != nil {
		return Claim{}, err
	}
	if err := idemcheck.Holder(holder); err != nil {
		return Claim{}, err
	}
	token := newToken()
	c, err := submit(ctx, s, opClaim, key, func(ctx context.Context) (Claim, error) {
		return s.form.claim(ctx, key, claimant{fingerprint: fingerprint, version: fingerprintVersion, token: token, holder: holder}, lease)
	})
	s.stats.recordClaim(c, err)
	return c, err
}

// Complete stores resp as key's response and makes the record Completed for retention, if it
// is still claimed with token. False means the token was fenced (reclaimed, released or
// completed). An empty or malformed token (not one a Claim handed out) is
// execstore.ErrInvalid before any I/O. An unanswered complete is settled by a read of the
// primary where the read proves the outcome. Otherwise the error matches
// execstore.ErrOutcomeUnknown, and always after a write-concern error (the write may be
// rolled back).
func (s *Store) Complete(ctx context.Context, key, token string, resp Response, retention time.Duration) (bool, error) {
	if err := idemcheck.Token(key, token); err != nil {
		return false, err
	}
	if err := idemcheck.Duration("retention", retention); err != nil {
		return false, err
	}
	if err := idemcheck.Response(resp.Status, resp.Header, resp.Body, s.opts.MaxBodyBytes); err != nil {
		return false, err
	}
	return submit(ctx, s, opComplete, key, func(ctx context.Context) (bool, error) {
		return s.form.complete(ctx, key, token, resp, retention)
	})
}

// Release deletes key's record if it is still claimed with token, so that the next claim is
// New (for a request that failed and may be retried). False means the token was fenced. An
// empty or malformed token is execstore.ErrInvalid before any I/O. When the release is
// unanswered, the error matches execstore.ErrOutcomeUnknown, and the lease still bounds how
// long the key stays claimed.
func (s *Store) Release(ctx context.Context, key, token string) (bool, error) {
	if err := idemcheck.Token(key, token); err != nil {
		return false, err
	}
	return submit(ctx, s, opRelease, key, func(ctx context.Context) (bool, error) {
		return s.recs.release(ctx, key, token)
	})
}

// Renew extends the lease of key's claim to lease from now (the server's clock), if it is
// still claimed with token. False means it was fenced or completed. An empty or malformed
// token is execstore.ErrInvalid before any I/O. A claim whose lease lapsed is still renewed
// if no one reclaimed it. When the renew is unanswered, the error matches
// execstore.ErrOutcomeUnknown.
func (s *Store) Renew(ctx context.Context, key, token string, lease time.Duration) (bool, error) {
	if err := idemcheck.Token(key, token); err != nil {
		return false, err
	}
	if err := idemcheck.Duration("lease", lease); err != nil {
		return false, err
	}
	return submit(ctx, s, opRenew, key, func(ctx context.Context) (bool, error) {
		return s.form.renew(ctx, key, token, lease)
	})
}

// Get returns key's record, or nil when there is none, it is unreadable, or it is completed
// and past its retention (by the server's clock).
func (s *Store) Get(ctx context.Context, key string) (*Record, error) {
	if err := idemcheck.Key(key); err != nil {
		return nil, err
	}
	return submit(ctx, s, opGet, key, func(ctx context.Context) (*Record, error) {
		return s.form.get(ctx, key)
	})
}
