package execstore

// Limits of what the store accepts. Input past them is refused with ErrInvalid before any I/O.
const (
	// MaxDocumentBytes is MongoDB's limit on one BSON document. An execution's snapshot,
	// outbox, spawns, timers, dedupe set and trace together must stay below it.
	MaxDocumentBytes = 16 * 1024 * 1024
	// MaxIDBytes bounds execution ids, event ids and timer paths.
	MaxIDBytes = 1024
	// MaxTargetedIDs bounds the executions one read of a Targeted store names.
	MaxTargetedIDs = 1024
)
