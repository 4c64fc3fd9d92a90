// Package execstore defines the contract of a durable execution store for workflow and
// statechart engines. It holds the records a store keeps (Execution, outbox entries, spawn
// intents, durable timers, trace steps), the typed errors it returns, and the Store interface
// every implementation meets.
//
// The contract, in one paragraph: every event an engine handles ends in one Commit. That is a
// single atomic, version-checked write of the execution's snapshot together with its outgoing
// events (the transactional outbox), its dedupe mark, its timer operations, its child spawns
// and an optional trace step. Either all of it becomes visible or none of it does. A commit made
// against a stale version fails with a *ConflictError and writes nothing. A commit whose
// outcome the store cannot know (the connection dropped, the caller's context ended after the
// write was sent) fails with an error matching ErrOutcomeUnknown, and the caller must reload
// before doing anything else.
//
// The package holds no I/O. The asynchronous MongoDB implementation lives in package aio. The
// MongoDB commands it issues are built in package ops.
package execstore

import (
	"context"
	"time"
)

// Store is the contract of an execution store. Every method takes a context. A call whose
// context ends before the operation reaches the server returns the context's error and has no
// effect. A write whose context ends after it was sent returns an error matching
// ErrOutcomeUnknown that wraps the context's error.
//
// Bad input (an empty id, a nil execution, a negative limit, a zero fire time, …) is refused
// with an error matching ErrInvalid before any I/O, and nothing is written.
//
// An execution's version moves on with each commit, and with each write of the store that
// makes one of its items pending again without a commit: DeadLetters.Revive, and the put-back
// of a timer that a commit removed in passing (package aio's, for a sweeper with
// relay.Options.CommitRemovesTimer). Each moves it on by one in its own single-document
// write, so a relay that knows every version of an execution knows every item it made
// pending, and a commit at a version read before such a write fails with a *ConflictError.
type Store interface {
	// Load returns the execution with the given id, or (nil, nil) when there is none.
	Load(ctx context.Context, id string) (*Execution, error)

	// LoadForEvent returns the execution and whether eventID is already in its dedupe set,
	// in one round trip, without shipping the dedupe set to the client. An unknown id gives
	// (nil, false, nil). A store may answer from a cache of what it committed and read
	// (package aio with Options.CacheSize). It then reports true for the events it knows are
	// in the set, and may report false for another (one processed by another process, or one
	// it has forgotten). Commit's dedupe guard then refuses that event with
	// ErrAlreadyProcessed. So either answer ends in the event being processed once.
	LoadForEvent(ctx context.Context, id, eventID string) (*Execution, bool, error)

	// IsProcessed reports whether eventID is in the execution's dedupe set. An unknown
	// execution has processed nothing.
	IsProcessed(ctx context.Context, id, eventID string) (bool, error)

	// Commit atomically writes exe's snapshot at exe.Version+1 together with everything in c,
	// guarded by exe.Version. On success exe.Version is incremented, and the outbox seqs are
	// returned in emit order. On a stale version it returns a *ConflictError (matching
	// ErrConflict), writes nothing and leaves exe.Version unchanged. A commit at version 0
	// creates the execution. Of two racing creators exactly one wins. A commit whose
	// c.ProcessedEventID is already in the dedupe set is refused with an
	// *AlreadyProcessedError (matching ErrAlreadyProcessed). That check is in the same atomic
	// write as the version's, so an event is processed at most once, even by a caller that
	// skipped LoadForEvent. Nothing is written, and exe is unchanged.
	Commit(ctx context.Context, exe *Execution, c Commit) ([]int64, error)

	// Save is a Commit with nothing but the snapshot.
	Save(ctx context.Context, exe *Execution) error

	// List returns one page of execution summaries matching q, ordered by id. Keep calling
	// with the returned NextCursor while it is not empty.
	List(ctx context.Context, q ListQuery) (Page, error)

	// PendingOutbox returns up to limit undelivered outbox entries (limit 0: all of them),
	// oldest seq first. Entries of one source execution always come in commit order.
	PendingOutbox(ctx context.Context, limit int) ([]OutboxEntry, error)

	// AckOutbox removes exactly the outbox entry seq of execution sourceID. Acking twice,
	// or acking an unknown seq, is a no-op.
	AckOutbox(ctx context.Context, sourceID string, seq int64) error

	// PendingSpawns returns up to limit pending spawn intents (limit 0: all), oldest first.
	PendingSpawns(ctx context.Context, limit int) ([]SpawnEntry, error)

	// AckSpawn removes exactly the spawn intent seq of execution parentID. It is idempotent.
	AckSpawn(ctx context.Context, parentID string, seq int64) error

	// DueTimers returns up to limit timers (limit 0: all) whose FireAt is at or before now,
	// earliest first (ties by execution id, then path). now is checked as a fire time is
	// (see TimerOp).
	DueTimers(ctx context.Context, now time.Time, limit int) ([]DueTimer, error)

	// DeleteTimer removes the timer at path only if it still fires at fireAt, so a
	// re-schedule that raced a sweep survives. A DueTimer's FireAt matches its timer
	// exactly. It reports whether a timer was removed. It does not tell a timer from one
	// re-armed to the same fire time: DeleteTimers does, by DueTimer.Version.
	DeleteTimer(ctx context.Context, id, path string, fireAt time.Time) (bool, error)

	// DeleteTimers is DeleteTimer for many timers at once (a sweep's result), in as few
	// server commands as the server allows. It does not report which timers it removed. A
	// DueTimer whose Version is positive removes the timer only if it is still the one that
	// version armed: a re-arm of the path to the same fire time since (by the timer's own
	// handler, say) survives. One with Version 0 matches by path and fire time alone.
	DeleteTimers(ctx context.Context, timers []DueTimer) error

	// AppendTrace records a trace step outside a commit. It stamps the step with the next
	// index of the execution's trace and keeps only the last TraceMax steps. The execution
	// must exist (ErrNotFound otherwise). Its version is not changed.
	AppendTrace(ctx context.Context, id string, step map[string]any) error

	// ReadTrace returns the kept trace steps, oldest first. It returns none for an unknown
	// execution.
	ReadTrace(ctx context.Context, id string) ([]TraceStep, error)

	// Close stops accepting calls (they get ErrClosed). It lets queued and in-flight work
	// finish within ctx, and releases every resource the store owns.
	Close(ctx context.Context) error
}
