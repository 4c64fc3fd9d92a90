package journal

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// lifeUntilReceipt claims id, checkpoints, prepares, dispatches and reconciles one attempt
// with the given outcome, and returns the last fence.
func lifeUntilReceipt(t *testing.T, j *Journal, id Identity, o Outcome) Fence {
	t.Helper()
	f, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	f, ckpt, err := j.Checkpoint(bg, f, PhaseBefore, []byte("state of "+id.ID))
	require.NoError(t, err)
	f, err = j.Prepare(bg, f, ckpt, []byte("operation of "+id.ID))
	require.NoError(t, err)
	a, err := j.Dispatch(bg, f)
	require.NoError(t, err)
	f, err = j.Reconcile(bg, a.Fence, Receipt{Attempt: a.N, Outcome: o, Data: []byte("receipt of " + id.ID)})
	require.NoError(t, err)
	return f
}

// One flipped byte in any stored ciphertext makes the read refuse the invocation with a
// typed error, never data.
func TestTamperedCiphertextRefused(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	coll := rawCollection(t, j)
	for _, field := range []string{"ckpt.ct", "op.ct", "receipts"} {
		id := ident("tamper-" + field)
		lifeUntilReceipt(t, j, id, Failed)
		d := rawDoc(t, coll, id.ID)
		switch field {
		case "ckpt.ct":
			rawSet(t, coll, id.ID, bson.D{{Key: field, Value: flip(d.Ckpt.CT)}})
		case "op.ct":
			rawSet(t, coll, id.ID, bson.D{{Key: field, Value: flip(d.Op.CT)}})
		default:
			d.Receipts[0].CT = flip(d.Receipts[0].CT)
			rawSet(t, coll, id.ID, bson.D{{Key: field, Value: d.Receipts}})
		}
		inv, err := j.Read(bg, id.ID)
		require.ErrorIs(t, err, ErrIntegrity, field)
		assert.Nil(t, inv)
		var ie *IntegrityError
		require.ErrorAs(t, err, &ie)
		assert.NotContains(t, err.Error(), "state of")
	}
	// A refused operation is never handed out: the same flip with an attempt to come.
	id := ident("tamper-dispatch")
	f, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	f, ckpt, err := j.Checkpoint(bg, f, PhaseBefore, []byte("s"))
	require.NoError(t, err)
	f, err = j.Prepare(bg, f, ckpt, []byte("op"))
	require.NoError(t, err)
	rawSet(t, coll, id.ID, bson.D{{Key: "op.ct", Value: flip(rawDoc(t, coll, id.ID).Op.CT)}})
	a, err := j.Dispatch(bg, f)
	require.ErrorIs(t, err, ErrIntegrity)
	assert.Nil(t, a.Operation)
}

// flip returns ct with one bit of its last byte flipped.
func flip(ct []byte) []byte {
	out := bytes.Clone(ct)
	out[len(out)-1] ^= 1
	return out
}

// A ciphertext copied to another invocation, another claim of the same id, or another
// phase is refused on read.
func TestTransplantedCiphertextRefused(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	coll := rawCollection(t, j)
	src, dst := ident("transplant-src"), ident("transplant-dst")
	lifeUntilReceipt(t, j, src, Failed)
	lifeUntilReceipt(t, j, dst, Failed)
	from := rawDoc(t, coll, src.ID)

	// To another invocation, each kind of ciphertext.
	for _, field := range []string{"ckpt", "op", "receipts"} {
		before := rawDoc(t, coll, dst.ID)
		var v any
		switch field {
		case "ckpt":
			v = from.Ckpt
		case "op":
			v = from.Op
		default:
			v = from.Receipts
		}
		rawSet(t, coll, dst.ID, bson.D{{Key: field, Value: v}})
		_, err := j.Read(bg, dst.ID)
		require.ErrorIs(t, err, ErrIntegrity, field)
		rawSet(t, coll, dst.ID, bson.D{{Key: "ckpt", Value: before.Ckpt}, {Key: "op", Value: before.Op},
			{Key: "receipts", Value: before.Receipts}})
		_, err = j.Read(bg, dst.ID)
		require.NoError(t, err)
	}

	// To another phase.
	rawSet(t, coll, dst.ID, bson.D{{Key: "ckpt.phase", Value: string(PhaseAfter)}})
	_, err := j.Read(bg, dst.ID)
	require.ErrorIs(t, err, ErrIntegrity)

	// To another claim of the same id: the invocation is claimed afresh (its document
	// deleted, as an operator might) and the old checkpoint pasted in.
	_, err = coll.DeleteOne(bg, bson.D{{Key: "_id", Value: src.ID}})
	require.NoError(t, err)
	f, err := j.Claim(bg, src, "worker-2")
	require.NoError(t, err)
	_, _, err = j.Checkpoint(bg, f, PhaseBefore, []byte("new state"))
	require.NoError(t, err)
	rawSet(t, coll, src.ID, bson.D{{Key: "ckpt", Value: from.Ckpt}})
	_, err = j.Read(bg, src.ID)
	require.ErrorIs(t, err, ErrIntegrity)
}

// Key rotation: records under the old key stay readable, new ones are sealed under the
// new key, and a ring that dropped the old key refuses the old records.
func TestKeyRotation(t *testing.T) {
	opts := testOptions(t)
	k1, k2 := NewKey("2026-01"), NewKey("2026-02")
	old := openJournal(t, mustRing(k1), opts)
	lifeUntilReceipt(t, old, ident("rot-old"), Succeeded)

	rotated := openJournal(t, mustRing(k2, k1), opts)
	inv, err := rotated.Read(bg, "rot-old")
	require.NoError(t, err)
	assert.Equal(t, "state of rot-old", string(inv.Checkpoint.State))
	lifeUntilReceipt(t, rotated, ident("rot-new"), Succeeded)
	coll := rawCollection(t, rotated)
	for id, key := range map[string]string{"rot-old": "2026-01", "rot-new": "2026-02"} {
		d := rawDoc(t, coll, id)
		for _, ct := range [][]byte{d.Ckpt.CT, d.Op.CT, d.Receipts[0].CT} {
			got, ok := KeyIDOf(ct)
			require.True(t, ok)
			assert.Equal(t, key, got, id)
		}
	}

	dropped := openJournal(t, mustRing(k2), opts)
	_, err = dropped.Read(bg, "rot-old")
	require.ErrorIs(t, err, ErrIntegrity)
	require.ErrorIs(t, err, ErrUnknownKey)
	_, err = dropped.Read(bg, "rot-new")
	require.NoError(t, err)
}

// No stored document holds a test payload in plaintext, nor a key's secret.
func TestNothingStoredInPlaintext(t *testing.T) {
	k := NewKey("plain")
	j := openJournal(t, mustRing(k), testOptions(t))
	lifeUntilReceipt(t, j, ident("plain-1"), Succeeded)
	f := lifeUntilReceipt(t, j, ident("plain-2"), Failed)
	f, _, err := j.Checkpoint(bg, f, PhaseAfter, []byte("state after plain-2"))
	require.NoError(t, err)
	a, err := j.Dispatch(bg, f)
	require.NoError(t, err)
	_, err = j.Reconcile(bg, a.Fence, Receipt{Attempt: a.N, Outcome: Unknown, Data: []byte("receipt unknown plain-2")})
	require.NoError(t, err)

	cur, err := rawCollection(t, j).Find(bg, bson.D{})
	require.NoError(t, err)
	var n int
	for cur.Next(bg) {
		n++
		raw := []byte(cur.Current)
		for _, p := range []string{"state of", "operation of", "receipt of", "state after", "receipt unknown"} {
			assert.False(t, bytes.Contains(raw, []byte(p)), "%q stored in plaintext", p)
		}
		assert.False(t, bytes.Contains(raw, k.Secret), "a key's secret stored")
	}
	require.NoError(t, cur.Err())
	assert.Equal(t, 2, n)
}
