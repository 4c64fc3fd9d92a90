package execstore

// Limits of what the store accepts. Input past them is refused with ErrInvalid before any I/O.
const (
	// MaxDocumentBytes is MongoDB's limit on one BSON document: an execution's snapshot,
	// outbox, spawns, timers, dedupe set and trace together must stay below it.
	MaxDocumentBytes = 16 * 1024 * 1024
	// MaxIDBytes bounds execution ids, event ids and timer paths.
	MaxIDBytes = 1024
	// DefaultListLimit is the page size of a ListQuery with Limit 0.
	DefaultListLimit = 100
	// MaxListLimit is the largest page size List accepts.
	MaxListLimit = 10000
)
