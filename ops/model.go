package ops

import (
	"time"

	"github.com/execstore/execstore/server"
)

// Collection names. Every execution is one document of ExecutionsCollection; the seq counters
// (see OutboxCounter) are documents of CountersCollection.
const (
	ExecutionsCollection = "executions"
	CountersCollection   = "counters"
)

// Field names of an executions document, besides its _id (the execution id). The document
// model in docs/document-model.md describes them all, and Indexes lists the indexes over
// them. The counts beside the outbox and the spawns are selected by PendingOutboxFilter and
// PendingSpawnsFilter. The fields of the dedupe set are Layout.DedupeFields.
const (
	FieldDefinitionID = "definition_id"
	FieldStatus       = "status"
	FieldParentID     = "parent_id" // null for a root
	FieldVersion      = "version"
	FieldData         = "data"       // the snapshot, binary
	FieldOutbox       = "outbox"     // {"<seq>": OutboxDoc}
	FieldSpawns       = "spawns"     // {"<seq>": SpawnDoc}
	FieldTimers       = "timers"     // {EncodeKey(path): fire_at}
	FieldTimerMin     = "timer_min"  // at or before the earliest fire_at in timers; absent when none
	FieldTrace        = "trace"      // MongoDB profile: [TraceDoc, …]; FerretDB: {"<index>": TraceDoc}
	FieldTraceNext    = "trace_next" // the index the next trace step gets
	FieldPartition    = "partition"  // PartitionOf(_id, Layout.Partitions), set at creation, never changed
	// FieldFinishedAt is when the last commit that wrote a finished status was made
	// (execstore.Status.Finished), by its committer's clock: the retention counts from it. A
	// later commit in a status not finished leaves it, and the status tells.
	FieldFinishedAt = "finished_at"
	// FieldCreatedAt is when the commit that created the execution was made, and
	// FieldUpdatedAt when the last commit was (Seqs.At), both by the committer's clock as BSON
	// dates. Only a commit writes them: an ack, a trace step appended outside a commit, a
	// failure or a revival leaves them. Documents written by a version of this module that did
	// not stamp them have neither until their next commit, which stamps FieldUpdatedAt only.
	FieldCreatedAt = "created_at"
	FieldUpdatedAt = "updated_at"
	// FieldCommitToken marks the commit that wrote the current version; only the store's
	// group commit writes it.
	FieldCommitToken = "commit_token"
	// FieldTimerVersions names each timer's arming: {EncodeKey(path): the version of the
	// commit that armed it} (execstore.DueTimer.Version). A timer armed by a version of this
	// module that did not write it has none, and is matched by path and fire time alone.
	FieldTimerVersions = "timer_v"
)

const (
	fOutboxN    = "outbox_n"    // number of entries in outbox
	fSpawnsN    = "spawns_n"    // number of entries in spawns
	fProcessed  = "processed"   // the dedupe set without a window: [event id, …]
	fProcessed0 = "processed_0" // with a window, its generations (see dedupe.go)
	fProcessed1 = "processed_1"
)

// fID is the _id field, the execution id.
const fID = "_id"

// Layout is how a store lays out its documents: what, besides a commit itself, decides the
// commands BuildCommit returns. Every store on a database must use the same Layout.
type Layout struct {
	// Profile picks the trace's shape (an array on MongoDB, a sub-document on FerretDB) and,
	// where FerretDB lacks a feature, the formulation of a command.
	Profile server.Profile
	// TraceMax is the number of steps kept in the trace ring; at least 1.
	TraceMax int
	// DedupeWindow, when positive, bounds the dedupe set to the event ids of the last
	// DedupeWindow to 2×DedupeWindow commits; 0 keeps every id. See Layout.DedupeFields.
	DedupeWindow int
	// Partitions is the number of partitions of the database (see FieldPartition). A
	// document a commit creates stores its partition among Partitions. 0 stores none, as an
	// earlier version of the module did: such a document is in partition 0's scans until it
	// is given its own.
	Partitions int
}

// OutboxDoc is one outbox entry as stored under FieldOutbox, keyed by its decimal seq.
type OutboxDoc struct {
	Seq      int64   `bson:"seq"`
	Version  int64   `bson:"v"` // the version of the commit that emitted it
	TargetID *string `bson:"target_id"`
	Event    []byte  `bson:"event"`
	// At is when its commit was made (Seqs.At); absent from entries of earlier versions.
	At       time.Time `bson:"at,omitempty"`
	Failures `bson:",inline"`
}

// Failures are the failed deliveries recorded of a pending entry or intent (FailCommand):
// absent until the first.
type Failures struct {
	Attempts  int64     `bson:"attempts,omitempty"`
	LastError string    `bson:"last_error,omitempty"`
	LastAt    time.Time `bson:"last_at,omitempty"`
}

// SpawnDoc is one spawn intent as stored under FieldSpawns, keyed by its decimal seq. The
// context is kept as encoded BSON so that any key the caller uses round-trips.
type SpawnDoc struct {
	Seq      int64  `bson:"seq"`
	Version  int64  `bson:"v"` // the version of the commit that spawned it
	ChildID  string `bson:"child_id"`
	RootPath string `bson:"root_path"`
	Context  []byte `bson:"context"`
	// At is when its commit was made (Seqs.At); absent from intents of earlier versions.
	At       time.Time `bson:"at,omitempty"`
	Failures `bson:",inline"`
}

// TraceDoc is one trace step as stored under FieldTrace. The step's fields are kept as
// encoded BSON.
type TraceDoc struct {
	Index int64  `bson:"index"`
	Step  []byte `bson:"step"`
	// At is when the step was recorded: its commit's time (Seqs.At), or the clock's reading
	// when it was appended outside a commit (AppendTraceCommand). It is absent from steps
	// written by a version of this module that did not record it.
	At time.Time `bson:"at,omitempty"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
