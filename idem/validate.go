package idem

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/execstore/execstore/internal/contract"
)

// Limits of what the store accepts; input past them is refused with execstore.ErrInvalid
// before any I/O. A key is bounded as an execution id is (execstore.MaxIDBytes).
const (
	// MaxFingerprintBytes bounds a fingerprint.
	MaxFingerprintBytes = 1024
	// MaxHolderBytes bounds a holder's name (ClaimAs).
	MaxHolderBytes = 256
	// MaxBodyLimit is the largest Options.MaxBodyBytes: a stored response must fit in one
	// MongoDB document with its headers.
	MaxBodyLimit = 15 << 20
)

func validateKey(key string) error { return contract.ValidateID("key", key) }

func validateClaim(key, fingerprint string, lease time.Duration) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if len(fingerprint) > MaxFingerprintBytes {
		return contract.Invalid("fingerprint", "is %d bytes, more than the %d allowed", len(fingerprint), MaxFingerprintBytes)
	}
	return validateDuration("lease", lease)
}

func validateHolder(holder string) error {
	if len(holder) > MaxHolderBytes {
		return contract.Invalid("holder", "is %d bytes, more than the %d allowed", len(holder), MaxHolderBytes)
	}
	if !utf8.ValidString(holder) {
		return contract.Invalid("holder", "is not valid UTF-8")
	}
	return nil
}

func validateDuration(field string, d time.Duration) error {
	if d < time.Millisecond {
		return contract.Invalid(field, "must be at least 1ms, got %v", d)
	}
	return nil
}

func validateToken(key, token string) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if len(token) != tokenHexLen || strings.Trim(token, "0123456789abcdef") != "" {
		return contract.Invalid("token", "is not a claim token (32 lowercase hex digits, as Claim hands out)")
	}
	return nil
}

func validateResponse(r Response, maxBody int) error {
	if r.Status < 100 || r.Status > 999 {
		return contract.Invalid("Response.Status", "must be between 100 and 999, got %d", r.Status)
	}
	if len(r.Body) > maxBody {
		return contract.Invalid("Response.Body", "is %d bytes, more than the %d allowed (Options.MaxBodyBytes)", len(r.Body), maxBody)
	}
	size := 0
	for k, vs := range r.Header {
		size += len(k)
		for _, v := range vs {
			size += len(v)
		}
	}
	if size > maxHeaderBytes {
		return contract.Invalid("Response.Header", "is %d bytes, more than the %d allowed", size, maxHeaderBytes)
	}
	return nil
}

// maxHeaderBytes bounds a stored response's headers.
const maxHeaderBytes = 256 << 10
