package contract

import (
	"time"

	"github.com/execstore/execstore"
)

// ValidateCutoffs checks the cutoffs of a retention (execstore.Retaining): each of a
// finished status, at a time a BSON date holds.
func ValidateCutoffs(cutoffs map[execstore.Status]time.Time) error {
	for s, t := range cutoffs {
		if !s.Finished() {
			return Invalid("cutoffs", "status %q does not finish an execution", s)
		}
		if t.IsZero() {
			return Invalid("cutoffs", "the cutoff of %s is the zero time", s)
		}
	}
	return nil
}

// ValidateExpired checks executions to delete for their retention: each a valid id.
func ValidateExpired(expired []execstore.FinishedExecution) error {
	for _, e := range expired {
		if err := ValidateID("expired", e.ID); err != nil {
			return err
		}
	}
	return nil
}
