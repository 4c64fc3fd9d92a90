package idem

import "github.com/execstore/execstore/internal/idemcheck"

// Limits of what the store accepts; input past them is refused with execstore.ErrInvalid
// before any I/O (package internal/idemcheck holds the checks, which memstore.Leases makes
// too). A key is bounded as an execution id is (execstore.MaxIDBytes).
const (
	// MaxFingerprintBytes bounds a fingerprint: 1024 bytes.
	MaxFingerprintBytes = idemcheck.MaxFingerprintBytes
	// MaxHolderBytes bounds a holder's name (ClaimAs): 256 bytes.
	MaxHolderBytes = idemcheck.MaxHolderBytes
	// MaxBodyLimit is the largest Options.MaxBodyBytes: a stored response must fit in one
	// MongoDB document with its headers.
	MaxBodyLimit = 15 << 20
)
