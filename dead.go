package execstore

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// MaxFailureBytes bounds the error text a store keeps of a failed delivery. A longer text
// is cut to at most that many bytes, on a UTF-8 boundary.
const MaxFailureBytes = 1024

// ItemKind is the kind of an item a relay delivers.
type ItemKind string

// The kinds of relayed items.
const (
	OutboxItem ItemKind = "outbox" // an outbox entry: ExecutionID is its SourceID, with its Seq
	SpawnItem  ItemKind = "spawn"  // a spawn intent: ExecutionID is its ParentID, with its Seq
	TimerItem  ItemKind = "timer"  // a durable timer: its ExecutionID, Path and FireAt
)

// ItemRef names one relayed item, pending or dead. An outbox entry and a spawn intent are
// named by their execution and seq, a timer by its execution, path and fire time (as the
// store holds it: pass a DueTimer's FireAt as is).
type ItemRef struct {
	Kind        ItemKind
	ExecutionID string
	Seq         int64     // OutboxItem, SpawnItem
	Path        string    // TimerItem
	FireAt      time.Time // TimerItem
}

// String names the item as the execstore CLI writes it: "outbox pay-t3/7", "spawn
// order-9/2", or `timer pay-t3 "reminder" at 2026-12-05T10:00:00Z` (the fire time in UTC,
// to the nanosecond it has).
func (r ItemRef) String() string {
	switch r.Kind {
	case OutboxItem, SpawnItem:
		return fmt.Sprintf("%s %s/%d", r.Kind, r.ExecutionID, r.Seq)
	case TimerItem:
		return fmt.Sprintf("timer %s %q at %s", r.ExecutionID, r.Path, r.FireAt.UTC().Format(time.RFC3339Nano))
	default:
		return fmt.Sprintf("%q %s/%d %q at %s", string(r.Kind), r.ExecutionID, r.Seq, r.Path, r.FireAt.UTC().Format(time.RFC3339Nano))
	}
}

// LogValue is String's text, for log/slog: a log line names an item as the CLI does.
func (r ItemRef) LogValue() slog.Value { return slog.StringValue(r.String()) }

// Failure is one failed delivery of a pending item, as its relay reports it.
type Failure struct {
	// Error is the failure's text. A store keeps at most MaxFailureBytes of it.
	Error string
	// At is when the delivery failed, by the reporting process's clock.
	At time.Time
	// Dead moves the item from pending to dead in the same write: it is delivered no more
	// until Revive puts it back.
	Dead bool
	// MaxAttempts, when positive, has the same write move the item to dead once its recorded
	// attempts, this failure included, reach MaxAttempts. The store counts them in that one
	// guarded write, so callers that report failures of one item at once (two relays without
	// a lease) never record more than MaxAttempts of them, and exactly one of them moves the
	// item: the one whose returned Attempts.Count is MaxAttempts (or more, when failures
	// recorded without it, or with a higher one, came first). 0 leaves it to Dead.
	MaxAttempts int
}

// Attempts is what a store keeps of an item's failed deliveries. The zero value is an item
// that never failed.
type Attempts struct {
	Count     int       // failed deliveries recorded
	LastError string    // the text of the last one, cut to MaxFailureBytes
	LastAt    time.Time // when the last one failed, by its reporter's clock
}

// DeadItem is an item moved to dead: its name, what it was while pending, and its failed
// deliveries. DeadAt is the last failure's At.
type DeadItem struct {
	ItemRef
	Attempts
	DeadAt time.Time
	// CommittedAt is the entry's or intent's (OutboxEntry.CommittedAt); zero for a timer.
	CommittedAt time.Time
	// Of an outbox entry: the entry as PendingOutbox returned it.
	TargetID string
	Event    []byte
	Version  int64 // the version of the commit that wrote the entry or spawn intent
	// Of a spawn intent: the intent as PendingSpawns returned it.
	ChildID  string
	RootPath string
	Context  map[string]any
}

// DeadQuery selects dead items. Filters AND together.
type DeadQuery struct {
	Kinds       []ItemKind // any of these; empty for every kind
	ExecutionID string     // "" for every execution
	Limit       int        // page size; 0 means 100, at most 10,000
	Cursor      string     // "" for the first page, else a DeadPage.NextCursor
}

// DeadPage is one page of dead items, ordered by execution id, then kind, then seq or path.
type DeadPage struct {
	Items      []DeadItem
	NextCursor string // "" when this is the last page
}

// DeadLetters is a Store that records failed deliveries and keeps the items whose
// deliveries failed for good, so that one bad item never holds up its execution's later ones.
// A pending item's Attempts come back with it (OutboxEntry, SpawnEntry, DueTimer). A dead
// item is not pending: no scan returns it, and its execution's later items are delivered.
//
// Each method is one atomic write (or one read) of the item's execution's document, guarded
// so that a commit or an ack of another process in between is never undone: a failure of an
// item already acked, already dead, or (a timer) re-armed or cancelled since, writes nothing.
//
// A write that makes an item pending again (Revive) moves its execution's version on by one,
// in that same write, as a commit does: a relay that hands a commit's items over without a
// scan when it knows every earlier version of the execution (package relay) then sees a
// version it did not know, and scans, so the revived item keeps its place before the items
// committed after it. A commit made at the version read before the revival fails with a
// *ConflictError, as it would after another process's commit.
type DeadLetters interface {
	Store

	// Fail records one failed delivery of the pending item ref: its attempts grow by one,
	// and the failure's text and time are kept. With f.Dead, or when f.MaxAttempts is
	// positive and the attempts now recorded reach it, the item moves from pending to dead
	// in the same write. It returns the attempts now recorded, and false when the item is not
	// pending (acked, dead, a timer re-armed or cancelled): then nothing is written. So a
	// call that returned true moved the item to dead exactly when f.Dead is set or
	// f.MaxAttempts > 0 and the returned Count >= f.MaxAttempts. Under contention a store may
	// give up with an error matching ErrRolledBack, having written nothing. Fail does not
	// change the execution's version. Cost: one single-document update.
	Fail(ctx context.Context, ref ItemRef, f Failure) (Attempts, bool, error)

	// ListDead returns one page of dead items matching q. Keep calling with the returned
	// NextCursor while it is not empty.
	ListDead(ctx context.Context, q DeadQuery) (DeadPage, error)

	// CountDead returns the number of dead items of each kind (kinds with none are absent).
	CountDead(ctx context.Context) (map[ItemKind]int64, error)

	// Revive puts the dead item ref back to pending, its attempts cleared, in one write: an
	// entry or intent under its own seq, a timer at its fire time (due at once when that has
	// passed) with the Version it had. The same write moves the execution's version on by
	// one (see above): reload the execution before its next commit. It reports false,
	// writing nothing, when ref is not dead (revived already, or never dead), so calling it
	// twice is harmless. A dead timer whose path holds another timer now stays dead, and
	// Revive returns an error matching ErrConflict.
	Revive(ctx context.Context, ref ItemRef) (bool, error)

	// Discard drops the dead item ref for good, in one write: it is no longer dead, nor
	// pending, and no relay delivers it. It reports false, writing nothing, when ref is not
	// dead (discarded or revived already, or never dead), so calling it twice is harmless.
	// It does not change the execution's version: nothing becomes pending.
	Discard(ctx context.Context, ref ItemRef) (bool, error)
}

// DeadCounting is a DeadLetters store divided into partitions that counts its dead items by
// partition: what a relay reports of the partitions it holds (relay.Backlog's Dead).
type DeadCounting interface {
	DeadLetters
	Partitioned

	// CountDeadIn returns the number of dead items, of every kind, in each of partitions that
	// holds any; a partition with none is absent. A partition out of [0, Partitions()) is
	// refused with ErrInvalid. An empty list returns nothing, with no I/O.
	CountDeadIn(ctx context.Context, partitions []int) (map[int]int64, error)
}
