package journal

import (
	"fmt"

	"github.com/execstore/execstore/internal/contract"
)

// MaxPayloadBytes bounds a checkpoint's state, a prepared operation and a receipt's data;
// past it they are refused with execstore.ErrInvalid before any I/O.
const MaxPayloadBytes = 1 << 20

func validateIdentity(id Identity) error {
	if err := contract.ValidateID("Identity.ID", id.ID); err != nil {
		return err
	}
	if err := contract.ValidateID("Identity.Scope", id.Scope); err != nil {
		return err
	}
	return contract.ValidateID("Identity.Digest", id.Digest)
}

func validateFence(f Fence) error {
	if err := contract.ValidateID("Fence.InvocationID", f.InvocationID); err != nil {
		return err
	}
	if err := contract.ValidateID("Fence.Owner", f.Owner); err != nil {
		return err
	}
	if f.Revision < 1 {
		return contract.Invalid("Fence.Revision", "must be at least 1, got %d", f.Revision)
	}
	if f.claim == "" {
		return contract.Invalid("Fence", "was not made by the journal: take it from Claim, Read or Reverify")
	}
	return nil
}

func validatePayload(field string, b []byte) error {
	if len(b) > MaxPayloadBytes {
		return contract.Invalid(field, "is %d bytes, more than the %d allowed", len(b), MaxPayloadBytes)
	}
	return nil
}

func invalidPhase(p Phase) error {
	return contract.Invalid("phase", "%q is not a known phase", p)
}

func invalidOutcome(o Outcome) error {
	return contract.Invalid("Receipt.Outcome", "%q is not a known outcome", o)
}

// sealFailure reports a cipher that could not seal; nothing was written.
func sealFailure(err error) error {
	return fmt.Errorf("journal: sealing refused by the cipher; nothing written: %w", err)
}
