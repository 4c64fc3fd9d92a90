package idem

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/execstore/execstore/internal/idemcheck"
)

// Outcome is what a Claim found, and did. Its value reads as a phrase ("lease reclaimed").
// The zero Outcome is no claim's.
type Outcome string

// The outcomes of a claim. Of any number of concurrent claims of one key, at most one
// gets New or LeaseReclaimed (a token). The others get AlreadyClaimed or AlreadyCompleted.
const (
	// New: there was no record (or an unreadable one, or a Completed one past its
	// retention); the caller now holds the key with a fresh token.
	New Outcome = "new"
	// LeaseReclaimed: a Claimed record's lease had lapsed; the caller now holds the key with
	// a fresh token, and the old token is fenced: its Complete, Renew and Release fail.
	LeaseReclaimed Outcome = "lease reclaimed"
	// AlreadyClaimed: someone else holds a live claim. Record is theirs; no token.
	AlreadyClaimed Outcome = "already claimed"
	// AlreadyCompleted: the request already ran; Record.Response is to be replayed. No token.
	AlreadyCompleted Outcome = "already completed"
)

// Claim is the result of Store.Claim.
type Claim struct {
	Outcome Outcome
	// Token proves the claim in Complete, Renew and Release; set only for New and
	// LeaseReclaimed. Keep it secret: whoever has it can complete the key.
	Token string
	// Record is the record after the claim: the caller's own for New and LeaseReclaimed,
	// the other holder's or the completed one otherwise.
	Record *Record
	// RecoveredFromCorrupt reports that the claim took over an unreadable record (one with a
	// state but missing or mistyped fields, whatever its lease said); Outcome is then New. A
	// record without a state holds nothing and is taken as absent: New, without this flag.
	// Both formulations say the same.
	RecoveredFromCorrupt bool
	// Settled reports that the claim's write went unanswered and its outcome was settled by
	// reading its token back: the claim is the caller's, as reported.
	Settled bool
}

// Held reports whether the caller holds the key: New or LeaseReclaimed.
func (c Claim) Held() bool { return c.Outcome == New || c.Outcome == LeaseReclaimed }

// ErrFingerprintMismatch: the key is claimed or completed for a different request (another
// fingerprint of the same fingerprint version). See FingerprintMismatchError.
var ErrFingerprintMismatch = errors.New("idem: idempotency key reused with a different request")

// ErrInProgress: Do found the key claimed by a live caller, and it did not complete within
// Options.WaitTimeout.
var ErrInProgress = errors.New("idem: request in progress under this key")

// ErrLeaseLost: Do's lease lapsed or was reclaimed before its result was stored; the
// result was not stored, and another caller may run (or have run) the request.
var ErrLeaseLost = errors.New("idem: lease lost")

// FingerprintMismatchError reports a key reused with a different request. It matches
// ErrFingerprintMismatch. Claim returns it with the Claim it found (no token): the stored
// response is never replayed to a different request.
type FingerprintMismatchError struct {
	Key           string
	Stored, Given string // the fingerprints
	Version       int    // their fingerprint version
}

func (e *FingerprintMismatchError) Error() string {
	return fmt.Sprintf("idem: idempotency key %q was used for another request (fingerprint %q, this one %q)", e.Key, e.Stored, e.Given)
}

// Is makes errors.Is(err, ErrFingerprintMismatch) true.
func (e *FingerprintMismatchError) Is(target error) bool { return target == ErrFingerprintMismatch }

// checkFingerprint returns the mismatch error for a claim that found rec, held by another
// request, or nil. Fingerprints of different versions cannot be compared: they are taken
// to match (a change of fingerprint algorithm must not turn every retry into a mismatch).
func checkFingerprint(rec *Record, fingerprint string, version int) error {
	if rec.FingerprintVersion == version && rec.Fingerprint != fingerprint {
		return &FingerprintMismatchError{Key: rec.Key, Stored: rec.Fingerprint, Given: fingerprint, Version: version}
	}
	return nil
}

// tokenHexLen is the length of a claim token: 128 random bits in hex.
const tokenHexLen = idemcheck.TokenHexLen

// newToken returns a fresh claim token from crypto/rand.
func newToken() string {
	var b [tokenHexLen / 2]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand's documented contract)
	return hex.EncodeToString(b[:])
}

// found is the Claim of a record the caller did not take: AlreadyClaimed or
// AlreadyCompleted, or a fingerprint mismatch.
func found(rec *Record, fingerprint string, version int) (Claim, error) {
	c := Claim{Outcome: AlreadyClaimed, Record: rec}
	if rec.State == Completed {
		c.Outcome = AlreadyCompleted
	}
	return c, checkFingerprint(rec, fingerprint, version)
}
