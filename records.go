package execstore

import "time"

// Status is the lifecycle state of an execution.
type Status string

// The statuses an execution can be in, in lifecycle order. A store refuses any other with
// ErrInvalid.
const (
	Pending    Status = "PENDING"
	Running    Status = "RUNNING"
	Done       Status = "DONE"
	Cancelled  Status = "CANCELLED"
	Suspended  Status = "SUSPENDED"
	Cancelling Status = "CANCELLING"
	Failed     Status = "FAILED"
)

// Execution is one running instance of a workflow or statechart definition.
type Execution struct {
	ID           string
	DefinitionID string
	Status       Status
	ParentID     string // "" for a root execution
	// Version is the optimistic-concurrency counter: 0 before the first commit, incremented
	// by each successful one, and by each store write that makes an item pending again (see
	// Store). A commit is accepted only if the stored version still equals it.
	Version int64
	// Data is the engine's snapshot, opaque to the store and returned byte for byte.
	Data []byte
	// TraceNext is the index the next trace step of this execution will get. The store sets
	// it on Load and on every successful Commit. Callers leave it alone: a wrong value costs
	// one extra round trip, never a wrong index.
	TraceNext int64
}

// Emit is one outgoing event, written to the outbox by the commit that emits it.
type Emit struct {
	TargetID string // the execution to deliver to; "" for none
	Event    []byte // opaque event bytes; an empty Event is refused with ErrInvalid
}

// OutboxEntry is one undelivered event.
type OutboxEntry struct {
	Seq      int64  // unique across the store; PendingOutbox returns each source's entries in commit order
	SourceID string // the execution whose commit emitted it (pass it to AckOutbox)
	Version  int64  // the version that commit created
	TargetID string // "" for none
	Event    []byte
	// CommittedAt is when the commit that emitted the entry was made, by the committing
	// process's clock, to the millisecond: the backlog's age counts from it. It is zero for
	// an entry written by a version of this module that did not record it.
	CommittedAt time.Time
	// Attempts are the failed deliveries a DeadLetters store recorded of the entry.
	Attempts Attempts
}

// Spawn is the intent to create a child execution, written atomically with the parent's
// commit and carried out afterwards by a relay.
type Spawn struct {
	ChildID  string
	RootPath string         // the fork's region, e.g. "Fork.A"
	Context  map[string]any // must be encodable as a BSON document; nil is kept as empty
}

// SpawnEntry is one pending spawn intent.
type SpawnEntry struct {
	Seq      int64
	ParentID string // the execution that committed it (pass it to AckSpawn)
	ChildID  string
	RootPath string
	Context  map[string]any
	// CommittedAt is when the commit that wrote the intent was made, as OutboxEntry's.
	CommittedAt time.Time
	// Attempts are the failed deliveries a DeadLetters store recorded of the intent.
	Attempts Attempts
}

// TimerOp schedules or cancels the durable timer of one path. Build it with ScheduleTimer
// or CancelTimer. At most one timer exists per (execution, path), so scheduling replaces.
//
// A fire time is kept as float64 seconds since the Unix epoch, so it comes back (in a
// DueTimer) rounded to the nearest float64 step. A time of whole microseconds comes back
// equal, from 1698 to 2242. Any other time comes back less than one step away. That is
// under 239 ns from 2004 to 2038, under 477 ns until 2106, under 954 ns until 2242, and under
// 31 µs in year 9999. The time read back is the one the store holds. Passed to DeleteTimer,
// it matches. Fire times from 0001-01-01T00:00:01Z to 9999-12-31T23:59:59Z are accepted. The
// zero time.Time and any other are refused with ErrInvalid.
type TimerOp struct {
	Path   string
	FireAt time.Time // ignored when Cancel is set
	Cancel bool
}

// ScheduleTimer returns the op that arms the timer at path to fire at fireAt. It drops
// fireAt's monotonic clock reading. Only the wall-clock instant is stored.
func ScheduleTimer(path string, fireAt time.Time) TimerOp {
	return TimerOp{Path: path, FireAt: fireAt.Round(0)}
}

// CancelTimer returns the op that removes the timer at path, if any.
func CancelTimer(path string) TimerOp { return TimerOp{Path: path, Cancel: true} }

// DueTimer is a timer whose fire time has come.
type DueTimer struct {
	ExecutionID string
	Path        string
	// FireAt is the fire time as the store holds it (see TimerOp on precision), in UTC with
	// no monotonic clock reading. Pass it as is to DeleteTimer.
	FireAt time.Time
	// Attempts are the failed deliveries a DeadLetters store recorded of the timer at this
	// fire time.
	Attempts Attempts
	// Version names this arming of the timer: the version of the commit that armed it (a
	// revived or put-back timer keeps its own). A re-arm of the path, even to the same fire
	// time, is another Version. DeleteTimers removes the timer only while it is still the
	// one of this Version. It is 0 when the store did not record it (a timer armed by an
	// earlier version of this module, or a store that keeps none): such a timer is matched
	// by path and fire time alone.
	Version int64
}

// TraceStep is one recorded step of an execution's trace.
type TraceStep struct {
	Index  int64 // per execution, strictly increasing, 0-based
	Fields map[string]any
	// At is when the step was recorded, by the recording process's clock, to the
	// millisecond, in UTC: its commit's time, or AppendTrace's. It is zero for a step written
	// by a version of this module that did not record it.
	At time.Time
}

// Commit is everything one handled event changes besides the snapshot. The zero Commit
// writes the snapshot alone.
type Commit struct {
	Emits []Emit
	// ProcessedEventID is added to the dedupe set. "" records nothing.
	ProcessedEventID string
	// Timers are applied in order. Of two ops on the same path, the last one wins.
	Timers []TimerOp
	Spawns []Spawn
	// Trace is recorded as one trace step. nil records none.
	Trace map[string]any
}

// Summary is what listing returns of an execution. It never holds the snapshot.
type Summary struct {
	ID           string
	DefinitionID string
	Status       Status
	ParentID     string
	Version      int64
}

// ListQuery selects executions. Filters AND together. An empty filter matches everything.
type ListQuery struct {
	Statuses     []Status // any of these; empty for any status
	DefinitionID string   // "" for any definition
	RootsOnly    bool     // only executions without a parent
	Limit        int      // page size; 0 means 100, at most 10,000
	Cursor       string   // "" for the first page, else a Page.NextCursor
}

// Page is one page of a listing.
type Page struct {
	Items      []Summary
	NextCursor string // "" when this is the last page
}
