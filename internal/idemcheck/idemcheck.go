// Package idemcheck holds the checks of a lease store's input that package idem's Store
// makes before any I/O. memstore.Leases makes the same ones, so both refuse the same input
// with the same *execstore.InvalidError (matching execstore.ErrInvalid). Each returns nil or
// that error.
package idemcheck

import (
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/execstore/execstore/internal/contract"
)

// Limits of what a lease store accepts. A key is bounded as an execution id is
// (execstore.MaxIDBytes).
const (
	MaxFingerprintBytes = 1024      // a fingerprint (idem.MaxFingerprintBytes)
	MaxHolderBytes      = 256       // a holder's name (idem.MaxHolderBytes)
	MaxHeaderBytes      = 256 << 10 // a stored response's headers, names and values
	TokenHexLen         = 32        // a claim token: 128 random bits in lowercase hex
	// DefaultMaxBodyBytes bounds a stored response's body when the store sets no bound of
	// its own (idem.Options.MaxBodyBytes 0).
	DefaultMaxBodyBytes = 1 << 20
)

// Key checks a record's key, or a prefix of keys.
func Key(key string) error { return contract.ValidateID("key", key) }

// Claim checks the input of a claim without its holder.
func Claim(key, fingerprint string, lease time.Duration) error {
	if err := Key(key); err != nil {
		return err
	}
	if len(fingerprint) > MaxFingerprintBytes {
		return contract.Invalid("fingerprint", "is %d bytes, more than the %d allowed", len(fingerprint), MaxFingerprintBytes)
	}
	return Duration("lease", lease)
}

// Holder checks a claimer's name: at most MaxHolderBytes of valid UTF-8.
func Holder(holder string) error {
	if len(holder) > MaxHolderBytes {
		return contract.Invalid("holder", "is %d bytes, more than the %d allowed", len(holder), MaxHolderBytes)
	}
	if !utf8.ValidString(holder) {
		return contract.Invalid("holder", "is not valid UTF-8")
	}
	return nil
}

// ClaimAs checks the input of ClaimAs (and of Claim, with an empty holder).
func ClaimAs(key, fingerprint string, lease time.Duration, holder string) error {
	if err := Claim(key, fingerprint, lease); err != nil {
		return err
	}
	return Holder(holder)
}

// Duration checks a lease or a retention, named field: at least 1ms.
func Duration(field string, d time.Duration) error {
	if d < time.Millisecond {
		return contract.Invalid(field, "must be at least 1ms, got %v", d)
	}
	return nil
}

// Token checks a key and the claim token it is held with.
func Token(key, token string) error {
	if err := Key(key); err != nil {
		return err
	}
	if len(token) != TokenHexLen || strings.Trim(token, "0123456789abcdef") != "" {
		return contract.Invalid("token", "is not a claim token (32 lowercase hex digits, as Claim hands out)")
	}
	return nil
}

// Response checks a response to store: its status, its body of at most maxBody bytes (0:
// DefaultMaxBodyBytes), and its headers.
func Response(status int, header http.Header, body []byte, maxBody int) error {
	if maxBody == 0 {
		maxBody = DefaultMaxBodyBytes
	}
	if status < 100 || status > 999 {
		return contract.Invalid("Response.Status", "must be between 100 and 999, got %d", status)
	}
	if len(body) > maxBody {
		return contract.Invalid("Response.Body", "is %d bytes, more than the %d allowed (Options.MaxBodyBytes)", len(body), maxBody)
	}
	size := 0
	for k, vs := range header {
		size += len(k)
		for _, v := range vs {
			size += len(v)
		}
	}
	if size > MaxHeaderBytes {
		return contract.Invalid("Response.Header", "is %d bytes, more than the %d allowed", size, MaxHeaderBytes)
	}
	return nil
}

// Complete checks the input of Complete: the response as Response does.
func Complete(key, token string, status int, header http.Header, body []byte, retention time.Duration, maxBody int) error {
	if err := Token(key, token); err != nil {
		return err
	}
	if err := Duration("retention", retention); err != nil {
		return err
	}
	return Response(status, header, body, maxBody)
}

// RenewAll checks the input of RenewAll: each claim's key and token, as held names them,
// then the lease.
func RenewAll[C any](claims []C, held func(C) (key, token string), lease time.Duration) error {
	for _, c := range claims {
		if err := Token(held(c)); err != nil {
			return err
		}
	}
	return Duration("lease", lease)
}

// Release checks the input of Release.
func Release(key, token string) error { return Token(key, token) }

// List checks the input of List: a prefix as a key, a limit not negative.
func List(prefix string, limit int) error {
	if err := Key(prefix); err != nil {
		return err
	}
	return contract.ValidateLimit("limit", limit)
}
