package journal

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// A ring opens what it sealed, with the same associated data only; one flipped bit
// anywhere is refused.
func TestKeyRingSealOpen(t *testing.T) {
	r, err := NewKeyRing(NewKey("k1"))
	require.NoError(t, err)
	ct, err := r.Seal([]byte("secret state"), []byte("ad-1"))
	require.NoError(t, err)
	assert.NotContains(t, string(ct), "secret state")
	pt, err := r.Open(ct, []byte("ad-1"))
	require.NoError(t, err)
	assert.Equal(t, "secret state", string(pt))

	_, err = r.Open(ct, []byte("ad-2"))
	assert.ErrorIs(t, err, ErrCiphertext)
	for i := range ct {
		bad := bytes.Clone(ct)
		bad[i] ^= 1
		_, err := r.Open(bad, []byte("ad-1"))
		assert.Error(t, err, "byte %d flipped", i)
	}
	_, err = r.Open(ct[:10], []byte("ad-1"))
	assert.ErrorIs(t, err, ErrCiphertext)
	_, err = r.Open(nil, nil)
	assert.ErrorIs(t, err, ErrCiphertext)
}

// Rotation: a new primary seals new ciphertexts, the old key still opens old ones, and a
// ring without the old key refuses them.
func TestKeyRingRotation(t *testing.T) {
	k1, k2 := NewKey("k1"), NewKey("k2")
	old, err := NewKeyRing(k1)
	require.NoError(t, err)
	ct1, err := old.Seal([]byte("one"), nil)
	require.NoError(t, err)

	rotated, err := NewKeyRing(k2, k1)
	require.NoError(t, err)
	pt, err := rotated.Open(ct1, nil)
	require.NoError(t, err)
	assert.Equal(t, "one", string(pt))
	ct2, err := rotated.Seal([]byte("two"), nil)
	require.NoError(t, err)
	id, ok := KeyIDOf(ct2)
	require.True(t, ok)
	assert.Equal(t, "k2", id)

	dropped, err := NewKeyRing(k2)
	require.NoError(t, err)
	_, err = dropped.Open(ct1, nil)
	assert.ErrorIs(t, err, ErrUnknownKey)
	_, err = dropped.Open(ct2, nil)
	assert.NoError(t, err)
}

// Bad keys are ErrInvalid, and no error, String or %#v shows a secret.
func TestKeyRingRefusesBadKeysAndHidesSecrets(t *testing.T) {
	secret := bytes.Repeat([]byte{'S'}, KeySize)
	for _, tc := range [][]Key{
		{{ID: "", Secret: secret}},
		{{ID: "a", Secret: secret[:16]}},
		{{ID: "a", Secret: secret}, {ID: "a", Secret: secret}},
		{{ID: string(bytes.Repeat([]byte{'x'}, MaxKeyIDBytes+1)), Secret: secret}},
	} {
		_, err := NewKeyRing(tc[0], tc[1:]...)
		require.ErrorIs(t, err, execstore.ErrInvalid)
		assert.NotContains(t, err.Error(), string(secret))
	}
	k := Key{ID: "a", Secret: secret}
	r, err := NewKeyRing(k)
	require.NoError(t, err)
	hex := fmt.Sprintf("%x", secret)
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d"} {
		for _, v := range []any{k, &k, []Key{k}, r} {
			s := fmt.Sprintf(verb, v)
			assert.NotContains(t, s, string(secret), verb)
			assert.NotContains(t, strings.ToLower(s), hex, verb)
			assert.NotContains(t, s, "83 83 83", "%s prints the secret's bytes: %s", verb, s)
			assert.Contains(t, s, `"a"`, "%s prints the key's id: %s", verb, s)
		}
	}
}

// A ring NewKeyRing did not make (the typed nil it returns with an error, or a zero
// KeyRing) seals and opens nothing: an error, never a panic.
func TestKeyRingWithoutKeys(t *testing.T) {
	ct, err := mustRing(NewKey("k1")).Seal([]byte("p"), nil)
	require.NoError(t, err)
	short, err := NewKeyRing(Key{ID: "k1", Secret: []byte("short")})
	require.ErrorIs(t, err, execstore.ErrInvalid)
	for name, r := range map[string]*KeyRing{"typed nil": short, "zero": {}} {
		_, err := r.Seal([]byte("p"), nil)
		assert.ErrorIs(t, err, ErrNoKeys, name)
		_, err = r.Open(ct, nil)
		assert.ErrorIs(t, err, ErrNoKeys, name)
		assert.Empty(t, r.Primary(), name)
		assert.Contains(t, []string{"journal.KeyRing(nil)", `journal.KeyRing(primary "", 0 keys)`}, fmt.Sprint(r), name)
	}
}
