package journal

import (
	"context"
	"slices"
	"sync"

	"github.com/execstore/execstore/internal/contract"
)

// uncertainty is the set of invocations a Journal wrote to without learning the outcome,
// or whose deciding read (VerifyOwner, Reverify, the read after a missed guard) failed.
// While it is not empty the journal refuses every mutation (fail closed): the caller must
// re-establish the truth with Reverify, a majority read of each of them, before writing
// again. Nothing clears it but a successful Reverify.
type uncertainty struct {
	mu  sync.Mutex
	ids map[string]bool
}

func (u *uncertainty) add(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.ids == nil {
		u.ids = map[string]bool{}
	}
	u.ids[id] = true
}

func (u *uncertainty) clear(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.ids, id)
}

// refusal returns the *UncertainError every mutation gets while the set is not empty.
func (u *uncertainty) refusal() error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.ids) == 0 {
		return nil
	}
	ids := make([]string, 0, len(u.ids))
	for id := range u.ids {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return &UncertainError{InvocationIDs: ids}
}

// Uncertain returns the invocations this Journal must Reverify before it writes again. It
// is empty when the journal is not uncertain.
func (j *Journal) Uncertain() []string {
	if err, ok := j.uncertain.refusal().(*UncertainError); ok {
		return err.InvocationIDs
	}
	return nil
}

// Reverify re-establishes the truth about invocation id after an unknown outcome. It is a
// majority read from the primary, with every ciphertext authenticated and the attempt flags
// checked. Once it succeeds, the journal is no longer uncertain about id. It accepts
// mutations again when it is uncertain about nothing else. The caller goes on from the
// invocation Reverify returns (its Fence), never from what it had before. Reverify returns
// execstore.ErrNotFound, and clears id, when the invocation does not exist: a claim that
// never landed, or a finished invocation the retention deleted (see DeleteExpired).
//
// It fails closed. Its read failing once sent is an *execstore.OutcomeUnknownError (Op
// "reverify"), and leaves the journal uncertain about id, or makes it so. An
// *IntegrityError clears nothing.
func (j *Journal) Reverify(ctx context.Context, id string) (*Invocation, error) {
	if err := contract.ValidateID("id", id); err != nil {
		return nil, err
	}
	return submit(ctx, j, "reverify", id, func(ctx context.Context) (*Invocation, error) {
		d, err := j.loadDeciding(ctx, "reverify", id, "")
		if err != nil {
			return nil, err
		}
		if d == nil {
			j.uncertain.clear(id)
			return nil, &notFoundError{op: "reverify", id: id}
		}
		inv, err := d.open(j.cipher)
		if err != nil {
			return nil, err
		}
		j.uncertain.clear(id)
		return inv, nil
	})
}
