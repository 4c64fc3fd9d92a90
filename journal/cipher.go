package journal

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/execstore/execstore/internal/contract"
)

// Cipher seals and opens the journal's payloads (checkpoints, prepared operations and
// receipts) with authenticated encryption. The associated data binds a ciphertext to where
// it was written: the invocation, its claim, the phase and the kind of payload. Open must
// refuse a ciphertext sealed with other associated data, or altered in any bit, with an
// error, never with data. Implementations must be safe for concurrent use. KeyRing is the
// standard one. Any AEAD (a KMS envelope, say) fits.
type Cipher interface {
	// Seal encrypts and authenticates plaintext and authenticates associatedData.
	Seal(plaintext, associatedData []byte) ([]byte, error)
	// Open authenticates ciphertext and associatedData and returns the plaintext.
	Open(ciphertext, associatedData []byte) ([]byte, error)
}

// Errors of KeyRing.Seal and KeyRing.Open. The journal reports any Cipher.Open failure as
// an *IntegrityError; these say why, for a KeyRing.
var (
	// ErrUnknownKey: the ciphertext names a key the ring does not hold (dropped, or never
	// there).
	ErrUnknownKey = errors.New("journal: ciphertext sealed under a key the ring does not hold")
	// ErrCiphertext: the ciphertext is malformed, altered, or sealed with other associated
	// data.
	ErrCiphertext = errors.New("journal: ciphertext refused: malformed, altered or bound elsewhere")
	// ErrNoKeys: the KeyRing holds no key: it is nil or its zero value, not one NewKeyRing
	// made.
	ErrNoKeys = errors.New("journal: key ring holds no key; make it with NewKeyRing")
)

// checkCipher refuses (execstore.ErrInvalid, before any I/O) a cipher the journal could not
// use: nil, a KeyRing NewKeyRing did not make (the typed nil it returns with its error, or
// a zero KeyRing), or any Cipher that cannot seal and open a probe, returns other data,
// opens the probe under other associated data, or panics doing so. Cost: one Seal and two
// Opens of a few bytes.
func checkCipher(c Cipher) (err error) {
	if c == nil {
		return contract.Invalid("cipher", "must not be nil: the journal stores nothing in plaintext")
	}
	refused := func(reason string, cause error) error {
		if cause == nil {
			return contract.Invalid("cipher", "%s", reason)
		}
		return fmt.Errorf("%w: %w", contract.Invalid("cipher", "%s", reason), cause)
	}
	defer func() {
		if recover() != nil {
			err = refused("panicked sealing or opening a probe", nil)
		}
	}()
	probe := []byte("execstore/journal cipher probe")
	ad := boundTo(Identity{ID: "probe"}, "probe", "probe")
	ct, err := c.Seal(probe, ad)
	if err != nil {
		return refused("cannot seal a probe", err)
	}
	plain, err := c.Open(ct, ad)
	if err != nil {
		return refused("cannot open the probe it sealed", err)
	}
	if !bytes.Equal(plain, probe) {
		return refused("opened the probe it sealed to other data", nil)
	}
	if _, err := c.Open(ct, boundTo(Identity{ID: "probe"}, "probe", "elsewhere")); err == nil {
		return refused("opened the probe under other associated data: it must authenticate it", nil)
	}
	return nil
}
