package journal

import (
	"context"
	"crypto/rand"
	"encoding/hex"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/unique"
)

// Claim claims the invocation id for owner. The first owner to claim it holds it, at
// revision 1. Of any number of concurrent claimers exactly one wins (the _id's uniqueness
// decides). The same owner claiming again gets its fence back at the stored revision.
// Another owner gets an *OwnerConflictError naming the holder. The same id with another
// scope or digest gets a *BindingError. An id whose invocation the retention deleted (see
// DeleteExpired) is claimed anew, as if it had never been; one deleted between the insert
// and the read is execstore.ErrNotFound, and claiming again claims it anew.
//
// Cost: one insert, and one majority read when the id exists. When the insert is
// unanswered, the error matches execstore.ErrOutcomeUnknown, and the journal is uncertain
// about id (Reverify it).
func (j *Journal) Claim(ctx context.Context, id Identity, owner string) (Fence, error) {
	if err := validateIdentity(id); err != nil {
		return Fence{}, err
	}
	if err := contract.ValidateID("owner", owner); err != nil {
		return Fence{}, err
	}
	if err := j.uncertain.refusal(); err != nil {
		return Fence{}, err
	}
	claim := newRandomID()
	return submit(ctx, j, "claim", id.ID, func(ctx context.Context) (Fence, error) {
		doc := document{ID: id.ID, Scope: id.Scope, Digest: id.Digest, Owner: owner, Claim: claim,
			Rev: 1, Latest: attemptNone}
		err := j.write(ctx, "claim", id.ID, func(ctx context.Context) error {
			_, err := j.coll.InsertOne(ctx, doc)
			return err
		})
		if err == nil {
			return Fence{InvocationID: id.ID, Owner: owner, Revision: 1, claim: claim, scope: id.Scope, digest: id.Digest}, nil
		}
		if !unique.IsDuplicateKey(err) {
			return Fence{}, err
		}
		d, err := j.bound(ctx, "claim", id)
		if err != nil {
			return Fence{}, err
		}
		if d == nil { // the holder's document was deleted in between, for its retention
			return Fence{}, &notFoundError{op: "claim", id: id.ID}
		}
		if d.Owner != owner {
			return Fence{}, &OwnerConflictError{InvocationID: id.ID, ExpectedOwner: owner, FoundOwner: d.Owner, FoundRevision: d.Rev}
		}
		return Fence{InvocationID: id.ID, Owner: owner, Revision: d.Rev, claim: d.Claim, scope: id.Scope, digest: id.Digest}, nil
	})
}

// HasInvocation reports whether the invocation exists with exactly this identity: a
// read-only majority read. An id that exists with another scope or digest is a
// *BindingError, never false.
func (j *Journal) HasInvocation(ctx context.Context, id Identity) (bool, error) {
	if err := validateIdentity(id); err != nil {
		return false, err
	}
	return submit(ctx, j, "has_invocation", id.ID, func(ctx context.Context) (bool, error) {
		d, err := j.bound(ctx, "has invocation", id)
		return d != nil, err
	})
}

// bound reads id's document and refuses it when it is bound to another scope or digest.
func (j *Journal) bound(ctx context.Context, op string, id Identity) (*document, error) {
	d, err := j.load(ctx, op, id.ID)
	if err != nil || d == nil {
		return nil, err
	}
	switch {
	case d.Scope != id.Scope:
		return nil, &BindingError{InvocationID: id.ID, Field: "scope"}
	case d.Digest != id.Digest:
		return nil, &BindingError{InvocationID: id.ID, Field: "digest"}
	}
	return d, nil
}

// VerifyOwner checks with a majority read from the primary that f still holds its
// invocation exactly: same owner, same claim, same revision. It writes nothing, retries
// nothing and advances nothing: nil, an *OwnerConflictError, or execstore.ErrNotFound.
//
// It fails closed: a read that fails once sent (a cut connection, a timeout, ctx ending
// while it runs) is an *execstore.OutcomeUnknownError (Op "verify owner") and makes the
// journal uncertain about the invocation, refusing every mutation (ErrUncertain) until
// Reverify succeeds. A call refused before it was sent (ctx ended while queued, the journal
// closed or overloaded) returns that refusal and changes nothing.
func (j *Journal) VerifyOwner(ctx context.Context, f Fence) error {
	if err := validateFence(f); err != nil {
		return err
	}
	_, err := submit(ctx, j, "verify_owner", f.InvocationID, func(ctx context.Context) (struct{}, error) {
		d, err := j.loadDeciding(ctx, "verify owner", f.InvocationID, "")
		switch {
		case err != nil:
			return struct{}{}, err
		case d == nil:
			return struct{}{}, &notFoundError{op: "verify owner", id: f.InvocationID}
		}
		return struct{}{}, holds(f, d)
	})
	return err
}

// Read returns invocation id as a majority read from the primary finds it, every
// ciphertext authenticated and the attempt flags checked against the receipts (an
// *IntegrityError otherwise), or execstore.ErrNotFound. A read that fails returns the
// read's error and leaves the journal as it was: to re-establish the truth after an
// unknown outcome, use Reverify.
func (j *Journal) Read(ctx context.Context, id string) (*Invocation, error) {
	if err := contract.ValidateID("id", id); err != nil {
		return nil, err
	}
	return submit(ctx, j, "read", id, func(ctx context.Context) (*Invocation, error) {
		d, err := j.load(ctx, "read", id)
		if err != nil {
			return nil, err
		}
		if d == nil {
			return nil, &notFoundError{op: "read", id: id}
		}
		return d.open(j.cipher)
	})
}

// newRandomID returns a random 128-bit id (a claim's, a checkpoint's), hex-encoded.
func newRandomID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
