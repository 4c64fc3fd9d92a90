package idem

import (
	"time"

	"github.com/execstore/execstore/internal/contract"
)

// The checks below are the ones a Store makes of each call's input before any I/O. Each
// returns nil, or the *execstore.InvalidError (matching execstore.ErrInvalid) the call
// returns. Other stores of leases (memstore.Leases) use them to refuse the same input with
// the same error.

// ValidateClaimAs checks the input of ClaimAs (and of Claim, with an empty holder).
func ValidateClaimAs(key, fingerprint string, lease time.Duration, holder string) error {
	if err := validateClaim(key, fingerprint, lease); err != nil {
		return err
	}
	return validateHolder(holder)
}

// ValidateComplete checks the input of Complete. maxBodyBytes bounds the body as
// Options.MaxBodyBytes does (0: its default, 1 MiB).
func ValidateComplete(key, token string, resp Response, retention time.Duration, maxBodyBytes int) error {
	if maxBodyBytes == 0 {
		maxBodyBytes = defaultMaxBodyBytes
	}
	if err := validateToken(key, token); err != nil {
		return err
	}
	if err := validateDuration("retention", retention); err != nil {
		return err
	}
	return validateResponse(resp, maxBodyBytes)
}

// ValidateRenewAll checks the input of RenewAll.
func ValidateRenewAll(claims []Held, lease time.Duration) error {
	for _, c := range claims {
		if err := validateToken(c.Key, c.Token); err != nil {
			return err
		}
	}
	return validateDuration("lease", lease)
}

// ValidateRelease checks the input of Release.
func ValidateRelease(key, token string) error { return validateToken(key, token) }

// ValidateList checks the input of List.
func ValidateList(prefix string, limit int) error {
	if err := validateKey(prefix); err != nil {
		return err
	}
	return contract.ValidateLimit("limit", limit)
}
