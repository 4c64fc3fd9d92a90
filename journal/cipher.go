package journal

import "errors"

// Cipher seals and opens the journal's payloads (checkpoints, prepared operations and
// receipts) with authenticated encryption. The associated data binds a ciphertext to where
// it was written (the invocation, its claim, the phase and the kind of payload); Open must
// refuse a ciphertext sealed with other associated data, or altered in any bit, with an
// error, never with data. Implementations must be safe for concurrent use. KeyRing is the
// standard one; any AEAD (a KMS envelope, say) fits.
type Cipher interface {
	// Seal encrypts and authenticates plaintext and authenticates associatedData.
	Seal(plaintext, associatedData []byte) ([]byte, error)
	// Open authenticates ciphertext and associatedData and returns the plaintext.
	Open(ciphertext, associatedData []byte) ([]byte, error)
}

// Errors of KeyRing.Open. The journal reports any Cipher.Open failure as an
// *IntegrityError; these say why, for a KeyRing.
var (
	// ErrUnknownKey: the ciphertext names a key the ring does not hold (dropped, or never
	// there).
	ErrUnknownKey = errors.New("journal: ciphertext sealed under a key the ring does not hold")
	// ErrCiphertext: the ciphertext is malformed, altered, or sealed with other associated
	// data.
	ErrCiphertext = errors.New("journal: ciphertext refused: malformed, altered or bound elsewhere")
)
