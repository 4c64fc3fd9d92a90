package journal

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Prepare against a checkpoint that is not the stored one writes nothing.
func TestPrepareNeedsTheStoredCheckpoint(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	id := ident("prepare-mismatch")
	f, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	_, err = j.Prepare(bg, f, "no-such-checkpoint", []byte("op"))
	var me *CheckpointMismatchError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, "", me.Found)

	f, first, err := j.Checkpoint(bg, f, PhaseBefore, []byte("one"))
	require.NoError(t, err)
	f, second, err := j.Checkpoint(bg, f, PhaseBefore, []byte("two"))
	require.NoError(t, err)
	_, err = j.Prepare(bg, f, first, []byte("op from one"))
	require.ErrorAs(t, err, &me)
	assert.Equal(t, CheckpointMismatchError{InvocationID: id.ID, Expected: first, Found: second}, *me)
	assert.ErrorIs(t, err, ErrCheckpointMismatch)

	inv, err := j.Read(bg, id.ID)
	require.NoError(t, err)
	assert.Equal(t, f.Revision, inv.Revision, "a refused prepare wrote")
	assert.Empty(t, inv.PreparedFrom)
	_, err = j.Dispatch(bg, f)
	require.ErrorIs(t, err, ErrState, "nothing is prepared")

	f, err = j.Prepare(bg, f, second, []byte("op from two"))
	require.NoError(t, err)
	a, err := j.Dispatch(bg, f)
	require.NoError(t, err)
	assert.Equal(t, "op from two", string(a.Operation))
	assert.Equal(t, second, a.CheckpointID)
	_, err = j.Prepare(bg, a.Fence, second, []byte("another op"))
	require.ErrorIs(t, err, ErrState, "the operation changed after an attempt was handed out")
}

// A failed attempt may be retried; an attempt without a receipt may not; once an attempt
// is UNKNOWN the body is never handed out again, and only a receipt moves it forward.
func TestUnknownNeverReplays(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	id := ident("unknown")
	f, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	f, ckpt, err := j.Checkpoint(bg, f, PhaseBefore, []byte("s"))
	require.NoError(t, err)
	f, err = j.Prepare(bg, f, ckpt, []byte("charge 42"))
	require.NoError(t, err)

	a1, err := j.Dispatch(bg, f)
	require.NoError(t, err)
	assert.Equal(t, 1, a1.N)
	_, err = j.Dispatch(bg, a1.Fence)
	require.ErrorIs(t, err, ErrState, "handed out again without a receipt")
	f, err = j.Reconcile(bg, a1.Fence, Receipt{Attempt: 1, Outcome: Failed, Data: []byte("declined")})
	require.NoError(t, err)

	a2, err := j.Dispatch(bg, f)
	require.NoError(t, err)
	assert.Equal(t, 2, a2.N)
	f, err = j.Reconcile(bg, a2.Fence, Receipt{Attempt: 2, Outcome: Unknown, Data: []byte("gateway timeout")})
	require.NoError(t, err)
	a, err := j.Dispatch(bg, f)
	require.ErrorIs(t, err, ErrNoReplay)
	assert.Nil(t, a.Operation)
	_, err = j.Reconcile(bg, f, Receipt{Attempt: 2, Outcome: Unknown})
	require.ErrorIs(t, err, ErrState, "unknown on unknown")

	// The outside system says it failed: settled, and still never replayed.
	f, err = j.Reconcile(bg, f, Receipt{Attempt: 2, Outcome: Failed, Data: []byte("gateway: no such charge")})
	require.NoError(t, err)
	_, err = j.Dispatch(bg, f)
	require.ErrorIs(t, err, ErrNoReplay)

	inv, err := j.Read(bg, id.ID)
	require.NoError(t, err)
	assert.True(t, inv.NoReplay)
	assert.Equal(t, string(Failed), inv.Latest)
	require.Len(t, inv.Receipts, 3)
	assert.Equal(t, Receipt{Attempt: 2, Outcome: Unknown, Data: []byte("gateway timeout")}, inv.Receipts[1])

	// Even with the stored flags forged back, the journal's own check of the receipts
	// refuses to hand the body out.
	coll := rawCollection(t, j)
	rawSet(t, coll, id.ID, bsonD("no_replay", false, "latest", string(Failed)))
	a, err = j.Dispatch(bg, f)
	require.ErrorIs(t, err, ErrNoReplay)
	assert.Nil(t, a.Operation)
}
