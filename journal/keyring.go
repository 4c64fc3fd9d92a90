package journal

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"fmt"

	"github.com/execstore/execstore/internal/contract"
)

// KeySize is the size of a KeyRing secret: AES-256.
const KeySize = 32

// MaxKeyIDBytes bounds a key id; it is written in every ciphertext.
const MaxKeyIDBytes = 64

// Key is one AES-256 key of a KeyRing: an id, written into every ciphertext it seals, and
// its secret. Printed with any verb of package fmt, it shows its id, never its secret.
type Key struct {
	ID     string
	Secret []byte // KeySize bytes
}

// Format prints the key by its id only, whatever the verb (%v, %+v, %#v, %s, %x, …), so
// that no verb prints the secret.
func (k Key) Format(f fmt.State, _ rune) { fmt.Fprintf(f, "journal.Key(%q)", k.ID) }

// KeyRing is a Cipher on the standard library's AES-256-GCM with a ring of keys. New
// ciphertexts are sealed under the primary key, and any key of the ring opens what it
// sealed. So keys rotate without rewriting history. Make a new ring with the new key as
// primary and the old ones after it. Drop an old key once nothing sealed under it is kept.
//
// A ciphertext is: format version (1 byte), key id length (1 byte), key id, a random
// 96-bit nonce, then the GCM output. The version and key id are authenticated with the
// caller's associated data, so neither can be swapped. Neither a KeyRing's errors nor its
// Format show a secret. It is safe for concurrent use.
type KeyRing struct {
	primary string
	aeads   map[string]cipher.AEAD
}

// ciphertextVersion is the first byte of every KeyRing ciphertext.
const ciphertextVersion = 1

// NewKeyRing returns a ring that seals under primary and opens under primary and older.
// Every key needs a distinct non-empty id of at most MaxKeyIDBytes and a KeySize-byte
// secret. The ring keeps nothing of the secrets but the ciphers made from them.
func NewKeyRing(primary Key, older ...Key) (*KeyRing, error) {
	r := &KeyRing{primary: primary.ID, aeads: map[string]cipher.AEAD{}}
	for i, k := range append([]Key{primary}, older...) {
		field := "KeyRing primary key"
		if i > 0 {
			field = fmt.Sprintf("KeyRing older key %d", i-1)
		}
		if k.ID == "" || len(k.ID) > MaxKeyIDBytes {
			return nil, contract.Invalid(field+" id", "must be 1 to %d bytes", MaxKeyIDBytes)
		}
		if _, dup := r.aeads[k.ID]; dup {
			return nil, contract.Invalid(field+" id", "%q appears twice", k.ID)
		}
		if len(k.Secret) != KeySize {
			return nil, contract.Invalid(field+" secret", "must be %d bytes, got %d", KeySize, len(k.Secret))
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, contract.Invalid(field+" secret", "refused by AES")
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, contract.Invalid(field+" secret", "refused by GCM")
		}
		r.aeads[k.ID] = aead
	}
	return r, nil
}

// NewKey returns a Key with id and a fresh random secret.
func NewKey(id string) Key {
	secret := make([]byte, KeySize)
	_, _ = rand.Read(secret) // never fails (crypto/rand)
	return Key{ID: id, Secret: secret}
}

// Primary returns the id of the key new ciphertexts are sealed under; "" for a ring without
// keys.
func (r *KeyRing) Primary() string {
	if r == nil {
		return ""
	}
	return r.primary
}

// Format prints the ring by its primary key's id and its size, whatever the verb (%v, %+v,
// %#v, %s, %x, …), so that no verb prints a secret.
func (r *KeyRing) Format(f fmt.State, _ rune) {
	if r == nil {
		fmt.Fprint(f, "journal.KeyRing(nil)")
		return
	}
	fmt.Fprintf(f, "journal.KeyRing(primary %q, %d keys)", r.primary, len(r.aeads))
}

// Seal encrypts plaintext under the primary key; see Cipher. A ring NewKeyRing did not make
// (nil, or the zero KeyRing) seals nothing: ErrNoKeys.
func (r *KeyRing) Seal(plaintext, associatedData []byte) ([]byte, error) {
	if r == nil {
		return nil, ErrNoKeys
	}
	aead, ok := r.aeads[r.primary]
	if !ok {
		return nil, ErrNoKeys
	}
	header := make([]byte, 0, 2+len(r.primary)+aead.NonceSize()+len(plaintext)+aead.Overhead())
	header = append(header, ciphertextVersion, byte(len(r.primary)))
	header = append(header, r.primary...)
	n := len(header)
	nonce := make([]byte, aead.NonceSize())
	_, _ = rand.Read(nonce)
	out := append(header, nonce...)
	return aead.Seal(out, nonce, plaintext, boundData(out[:n], associatedData)), nil
}

// Open authenticates and decrypts a ciphertext sealed by a ring holding the same key; see
// Cipher. Errors match ErrUnknownKey or ErrCiphertext, and ErrNoKeys for a ring NewKeyRing
// did not make.
func (r *KeyRing) Open(ciphertext, associatedData []byte) ([]byte, error) {
	if r == nil || len(r.aeads) == 0 {
		return nil, ErrNoKeys
	}
	id, ok := KeyIDOf(ciphertext)
	if !ok {
		return nil, ErrCiphertext
	}
	aead, ok := r.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w (key id %q)", ErrUnknownKey, id)
	}
	n := 2 + len(id)
	if len(ciphertext) < n+aead.NonceSize()+aead.Overhead() {
		return nil, ErrCiphertext
	}
	nonce := ciphertext[n : n+aead.NonceSize()]
	plain, err := aead.Open(nil, nonce, ciphertext[n+aead.NonceSize():], boundData(ciphertext[:n], associatedData))
	if err != nil {
		return nil, ErrCiphertext
	}
	return plain, nil
}

// KeyIDOf returns the id of the key a KeyRing ciphertext was sealed under, without
// authenticating anything (for rotation: to find what is still sealed under an old key).
func KeyIDOf(ciphertext []byte) (string, bool) {
	if len(ciphertext) < 2 || ciphertext[0] != ciphertextVersion {
		return "", false
	}
	n := int(ciphertext[1])
	if n == 0 || len(ciphertext) < 2+n {
		return "", false
	}
	return string(ciphertext[2 : 2+n]), true
}

// boundData is what GCM authenticates besides the plaintext: the ciphertext's header
// (version and key id) and the caller's associated data.
func boundData(header, associatedData []byte) []byte {
	b := make([]byte, 0, len(header)+len(associatedData))
	return append(append(b, header...), associatedData...)
}
