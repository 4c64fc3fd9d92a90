package journal

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
)

// preparedFence claims id, checkpoints and prepares it, and returns the fence.
func preparedFence(t *testing.T, j *Journal, id Identity) Fence {
	t.Helper()
	f, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	f, ckpt, err := j.Checkpoint(bg, f, PhaseBefore, []byte("state"))
	require.NoError(t, err)
	f, err = j.Prepare(bg, f, ckpt, []byte("operation"))
	require.NoError(t, err)
	return f
}

// The attempt flags (attempts, latest, no_replay) are plaintext, but the authenticated
// receipts say what they must be: flags altered in the stored document are an
// *IntegrityError on every read and every refusal, never an owner conflict whose expected
// and found are the same, and a refused Dispatch records no attempt.
func TestTamperedFlagsRefused(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	coll := rawCollection(t, j)

	for _, tc := range []struct {
		name  string
		setup func(id Identity) Fence // the state before the flags are altered
		set   bson.D
		call  func(f Fence) error
	}{
		{"dispatch, latest unknown without no-replay", func(id Identity) Fence { return preparedFence(t, j, id) },
			bsonD("latest", string(Unknown)),
			func(f Fence) error { _, err := j.Dispatch(bg, f); return err }},
		{"dispatch, latest not a state", func(id Identity) Fence { return preparedFence(t, j, id) },
			bsonD("latest", "bogus"),
			func(f Fence) error { _, err := j.Dispatch(bg, f); return err }},
		{"dispatch, attempts without an attempt", func(id Identity) Fence { return preparedFence(t, j, id) },
			bsonD("attempts", 2),
			func(f Fence) error { _, err := j.Dispatch(bg, f); return err }},
		{"dispatch, receipts forged away", func(id Identity) Fence { return lifeUntilReceipt(t, j, id, Failed) },
			bsonD("latest", attemptNone, "attempts", 0),
			func(f Fence) error { _, err := j.Dispatch(bg, f); return err }},
		{"dispatch, a failed attempt forged from a pending one", func(id Identity) Fence {
			a, err := j.Dispatch(bg, preparedFence(t, j, id))
			require.NoError(t, err)
			return a.Fence
		}, bsonD("latest", string(Failed)),
			func(f Fence) error { _, err := j.Dispatch(bg, f); return err }},
		{"reconcile, latest not a state", func(id Identity) Fence {
			a, err := j.Dispatch(bg, preparedFence(t, j, id))
			require.NoError(t, err)
			return a.Fence
		}, bsonD("latest", "bogus"),
			func(f Fence) error {
				_, err := j.Reconcile(bg, f, Receipt{Attempt: 1, Outcome: Failed})
				return err
			}},
		{"prepare, attempts forged", func(id Identity) Fence {
			f, err := j.Claim(bg, id, "worker-1")
			require.NoError(t, err)
			f, _, err = j.Checkpoint(bg, f, PhaseBefore, []byte("state"))
			require.NoError(t, err)
			return f
		}, bsonD("attempts", 1),
			func(f Fence) error {
				_, err := j.Prepare(bg, f, rawDoc(t, coll, f.InvocationID).Ckpt.ID, []byte("op"))
				return err
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := ident("flags " + tc.name)
			f := tc.setup(id)
			rawSet(t, coll, id.ID, tc.set)
			before := rawDoc(t, coll, id.ID)

			err := tc.call(f)
			var ie *IntegrityError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, id.ID, ie.InvocationID)
			assert.NotErrorIs(t, err, execstore.ErrConflict)
			assert.Equal(t, before, rawDoc(t, coll, id.ID), "a refusal wrote")

			_, err = j.Read(bg, id.ID)
			require.ErrorIs(t, err, ErrIntegrity, "read")
		})
	}
}

// A Dispatch refused for what it finds (a forged flag, an altered operation, an attempt that
// ended unknown) records no attempt: the stored document is as it was.
func TestRefusedDispatchRecordsNothing(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	coll := rawCollection(t, j)

	// The operation's ciphertext altered.
	id := ident("refused-altered-op")
	f := preparedFence(t, j, id)
	rawSet(t, coll, id.ID, bson.D{{Key: "op.ct", Value: flip(rawDoc(t, coll, id.ID).Op.CT)}})
	before := rawDoc(t, coll, id.ID)
	_, err := j.Dispatch(bg, f)
	require.ErrorIs(t, err, ErrIntegrity)
	assert.Equal(t, before, rawDoc(t, coll, id.ID), "an attempt was recorded for an operation never handed out")

	// An attempt reconciled unknown, the no-replay flag forged away.
	id = ident("refused-forged-no-replay")
	f = preparedFence(t, j, id)
	a, err := j.Dispatch(bg, f)
	require.NoError(t, err)
	f, err = j.Reconcile(bg, a.Fence, Receipt{Attempt: 1, Outcome: Unknown})
	require.NoError(t, err)
	f, err = j.Reconcile(bg, f, Receipt{Attempt: 1, Outcome: Failed})
	require.NoError(t, err)
	rawSet(t, coll, id.ID, bsonD("no_replay", false))
	before = rawDoc(t, coll, id.ID)
	_, err = j.Dispatch(bg, f)
	require.ErrorIs(t, err, ErrNoReplay)
	require.ErrorIs(t, err, ErrIntegrity)
	assert.Equal(t, before, rawDoc(t, coll, id.ID), "an attempt was recorded for an operation never handed out")

	// Refused for the state it finds: no attempt either, and the fence still holds.
	id = ident("refused-pending")
	f = preparedFence(t, j, id)
	a, err = j.Dispatch(bg, f)
	require.NoError(t, err)
	_, err = j.Dispatch(bg, a.Fence)
	require.ErrorIs(t, err, ErrState)
	require.NoError(t, j.VerifyOwner(bg, a.Fence))
}

// A guarded write that matched nothing although the fence holds and the state allows it met
// a document changed outside the journal (each of the journal's writes moves the revision):
// explain says so with an *IntegrityError, never with a conflict whose expected and found
// are the same.
func TestUnexplainedMissIsIntegrity(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	f := preparedFence(t, j, ident("unexplained-miss"))
	err := j.explain(bg, "checkpoint", f, noStateRule)
	var ie *IntegrityError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "document", ie.What)
	assert.NotErrorIs(t, err, execstore.ErrConflict)
}
