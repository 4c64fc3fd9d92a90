package journal

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// Of many concurrent claimers exactly one wins, at revision 1; every other is refused
// naming the winner.
func TestFirstOwnerRace(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	const claimers = 16
	for round := range 3 {
		id := ident(fmt.Sprintf("race-%d", round))
		var wg sync.WaitGroup
		fences := make([]Fence, claimers)
		errs := make([]error, claimers)
		for i := range claimers {
			wg.Go(func() { fences[i], errs[i] = j.Claim(bg, id, fmt.Sprintf("owner-%d", i)) })
		}
		wg.Wait()
		winner := -1
		for i, err := range errs {
			if err == nil {
				require.Equal(t, -1, winner, "round %d: two winners", round)
				winner = i
				continue
			}
			var oc *OwnerConflictError
			require.ErrorAs(t, err, &oc)
			assert.ErrorIs(t, err, execstore.ErrConflict)
			assert.Equal(t, fmt.Sprintf("owner-%d", i), oc.ExpectedOwner)
		}
		require.NotEqual(t, -1, winner, "round %d: no winner", round)
		assert.EqualValues(t, 1, fences[winner].Revision)
		for i, err := range errs {
			var oc *OwnerConflictError
			if i != winner && errors.As(err, &oc) {
				assert.Equal(t, fmt.Sprintf("owner-%d", winner), oc.FoundOwner)
			}
		}
		require.NoError(t, j.VerifyOwner(bg, fences[winner]))
	}
}

// The same owner claiming again gets its binding back, at the stored revision.
func TestSameOwnerReclaim(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	id := ident("reclaim")
	f, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	f, _, err = j.Checkpoint(bg, f, PhaseBefore, []byte("s"))
	require.NoError(t, err)
	again, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	assert.Equal(t, f, again)
	assert.EqualValues(t, 2, again.Revision)
}

// A stale revision or another owner writes nothing and says expected/found; VerifyOwner
// says the same, and advances nothing.
func TestStaleRevisionAndForeignOwner(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	id := ident("cas")
	f1, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	f2, _, err := j.Checkpoint(bg, f1, PhaseBefore, []byte("one"))
	require.NoError(t, err)

	_, _, err = j.Checkpoint(bg, f1, PhaseBefore, []byte("stale"))
	var oc *OwnerConflictError
	require.ErrorAs(t, err, &oc)
	assert.Equal(t, OwnerConflictError{InvocationID: id.ID, ExpectedOwner: "worker-1", FoundOwner: "worker-1",
		ExpectedRevision: 1, FoundRevision: 2}, *oc)

	foreign := f2
	foreign.Owner = "intruder"
	_, _, err = j.Checkpoint(bg, foreign, PhaseBefore, []byte("foreign"))
	require.ErrorAs(t, err, &oc)
	assert.Equal(t, "intruder", oc.ExpectedOwner)
	assert.Equal(t, "worker-1", oc.FoundOwner)
	require.ErrorIs(t, j.VerifyOwner(bg, foreign), execstore.ErrConflict)
	require.ErrorIs(t, j.VerifyOwner(bg, f1), execstore.ErrConflict)

	inv, err := j.Read(bg, id.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 2, inv.Revision, "a refused write or a verify advanced the revision")
	assert.Equal(t, "one", string(inv.Checkpoint.State))
	require.NoError(t, j.VerifyOwner(bg, f2))
	require.NoError(t, j.VerifyOwner(bg, f2))
	inv, err = j.Read(bg, id.ID)
	require.NoError(t, err)
	assert.EqualValues(t, 2, inv.Revision)
}

// An id that exists with another scope or digest is a binding refusal, never "absent",
// for HasInvocation and Claim alike.
func TestBindingRefusal(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	id := ident("bound")
	has, err := j.HasInvocation(bg, id)
	require.NoError(t, err)
	assert.False(t, has)
	_, err = j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	has, err = j.HasInvocation(bg, id)
	require.NoError(t, err)
	assert.True(t, has)

	otherScope, otherDigest := id, id
	otherScope.Scope = "tenant-b/tools"
	otherDigest.Digest = "sha256:other"
	for field, other := range map[string]Identity{"scope": otherScope, "digest": otherDigest} {
		has, err := j.HasInvocation(bg, other)
		var be *BindingError
		require.ErrorAs(t, err, &be, field)
		assert.Equal(t, field, be.Field)
		assert.False(t, has)
		_, err = j.Claim(bg, other, "worker-1")
		assert.ErrorIs(t, err, ErrBinding, field)
	}
}

// Bad input is ErrInvalid before any I/O: the journal is closed, and still says so.
func TestInvalidInputBeforeIO(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	f, err := j.Claim(bg, ident("valid"), "worker-1")
	require.NoError(t, err)
	require.NoError(t, j.Close(bg))
	big := make([]byte, MaxPayloadBytes+1)
	for name, call := range map[string]func() error{
		"empty id":    func() error { _, err := j.Claim(bg, Identity{Scope: "s", Digest: "d"}, "o"); return err },
		"empty scope": func() error { _, err := j.HasInvocation(bg, Identity{ID: "i", Digest: "d"}); return err },
		"empty owner": func() error { _, err := j.Claim(bg, ident("x"), ""); return err },
		"made fence":  func() error { return j.VerifyOwner(bg, Fence{InvocationID: "x", Owner: "o", Revision: 1}) },
		"phase":       func() error { _, _, err := j.Checkpoint(bg, f, Phase("during"), nil); return err },
		"big state":   func() error { _, _, err := j.Checkpoint(bg, f, PhaseBefore, big); return err },
		"big op":      func() error { _, err := j.Prepare(bg, f, "c", big); return err },
		"no ckpt":     func() error { _, err := j.Prepare(bg, f, "", nil); return err },
		"outcome":     func() error { _, err := j.Reconcile(bg, f, Receipt{Attempt: 1, Outcome: "maybe"}); return err },
		"attempt":     func() error { _, err := j.Reconcile(bg, f, Receipt{Outcome: Failed}); return err },
		"big receipt": func() error {
			_, err := j.Reconcile(bg, f, Receipt{Attempt: 1, Outcome: Failed, Data: big})
			return err
		},
		"read id":    func() error { _, err := j.Read(bg, ""); return err },
		"zero fence": func() error { _, err := j.Dispatch(bg, Fence{}); return err },
	} {
		assert.ErrorIs(t, call(), execstore.ErrInvalid, name)
	}
	_, err = j.Read(bg, "valid")
	assert.ErrorIs(t, err, execstore.ErrClosed)
}

// A call about an invocation that does not exist is execstore.ErrNotFound, and its text
// names the invocation, never an execution.
func TestNotFoundNamesTheInvocation(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	_, err := j.Read(bg, "absent")
	require.ErrorIs(t, err, execstore.ErrNotFound)
	assert.EqualError(t, err, `journal: read of invocation "absent": no such invocation`)

	_, err = j.Reverify(bg, "absent")
	require.ErrorIs(t, err, execstore.ErrNotFound)
	assert.EqualError(t, err, `journal: reverify of invocation "absent": no such invocation`)

	// A fence of an invocation deleted behind the journal's back.
	id := ident("deleted")
	f, err := j.Claim(bg, id, "worker-1")
	require.NoError(t, err)
	_, err = rawCollection(t, j).DeleteOne(bg, bsonD("_id", id.ID))
	require.NoError(t, err)
	err = j.VerifyOwner(bg, f)
	require.ErrorIs(t, err, execstore.ErrNotFound)
	assert.EqualError(t, err, `journal: verify owner of invocation "deleted": no such invocation`)
	_, err = j.Dispatch(bg, f)
	require.ErrorIs(t, err, execstore.ErrNotFound)
	assert.EqualError(t, err, `journal: dispatch of invocation "deleted": no such invocation`)
	_, _, err = j.Checkpoint(bg, f, PhaseBefore, []byte("state"))
	require.ErrorIs(t, err, execstore.ErrNotFound)
	assert.EqualError(t, err, `journal: checkpoint of invocation "deleted": no such invocation`)
}
