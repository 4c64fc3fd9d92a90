package execstore

import (
	"context"
	"hash/fnv"
	"time"
)

// DefaultPartitions is the number of partitions of a store whose database records none yet
// and whose options ask for none.
const DefaultPartitions = 64

// MaxPartitions bounds the number of partitions a store may be divided into.
const MaxPartitions = 4096

// PartitionOf returns the partition of execution id among n partitions: the 64-bit FNV-1a
// hash of the id's bytes, modulo n. It never changes, so a document keeps the partition it
// was created in. It panics when n is not positive.
func PartitionOf(id string, n int) int {
	if n <= 0 {
		panic("execstore: PartitionOf needs a positive number of partitions")
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}

// Partitioned is a Store whose executions are divided into a fixed number of partitions, so
// that several relays can share the delivery: each scans only the partitions it holds. An
// execution's partition is PartitionOf(id, Partitions()). A scan of some partitions returns
// what the whole store's scan would, restricted to the executions of those partitions, in
// the same order. An empty list of partitions returns nothing, with no I/O. A partition out
// of [0, Partitions()) is refused with ErrInvalid.
type Partitioned interface {
	Store

	// Partitions returns the number of partitions, fixed for the store's data.
	Partitions() int

	// PendingOutboxIn is PendingOutbox restricted to the sources in the given partitions.
	PendingOutboxIn(ctx context.Context, partitions []int, limit int) ([]OutboxEntry, error)

	// PendingSpawnsIn is PendingSpawns restricted to the parents in the given partitions.
	PendingSpawnsIn(ctx context.Context, partitions []int, limit int) ([]SpawnEntry, error)

	// DueTimersIn is DueTimers restricted to the executions in the given partitions.
	DueTimersIn(ctx context.Context, partitions []int, now time.Time, limit int) ([]DueTimer, error)
}

// Targeted is a Store that also reads the pending items of named executions alone, by their
// ids: a relay that knows which executions it must read again reads those, not every
// execution of its partitions. A read of some executions returns what the whole store's read
// would, restricted to those executions, in the same order. An empty list returns nothing,
// with no I/O. An invalid id, or more than MaxTargetedIDs of them, is refused with
// ErrInvalid; an id named twice counts once; an id of no execution matches nothing.
type Targeted interface {
	Store

	// PendingOutboxOf is PendingOutbox restricted to the sources ids.
	PendingOutboxOf(ctx context.Context, ids []string, limit int) ([]OutboxEntry, error)

	// DueTimersOf is DueTimers restricted to the executions ids.
	DueTimersOf(ctx context.Context, ids []string, now time.Time, limit int) ([]DueTimer, error)
}

// Excluding is a Partitioned store whose scans can leave some executions out: a relay names
// sources whose entries it already holds in flight, so that its polls return only what it
// does not hold. A scan that leaves out some executions returns what PendingOutboxIn would,
// without the entries of those executions, in the same order; a limit
// counts the items returned. Leaving out none is the scan itself. An invalid id, or more than
// MaxTargetedIDs of them, is refused with ErrInvalid before any I/O; an id named twice counts
// once; an id of no execution leaves out nothing.
type Excluding interface {
	Partitioned

	// PendingOutboxExcept is PendingOutboxIn without the entries of the sources except.
	PendingOutboxExcept(ctx context.Context, partitions []int, except []string, limit int) ([]OutboxEntry, error)
}
