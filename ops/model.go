package ops

import (
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"

	"github.com/execstore/execstore"
)

// Collection names.
const (
	ExecutionsCollection = "executions"
	CountersCollection   = "counters"
)

// Field names of an executions document. See the README for the whole model.
const (
	fID         = "_id"
	fDefinition = "definition_id"
	fStatus     = "status"
	fParent     = "parent_id" // null for a root
	fVersion    = "version"
	fData       = "data"
	fOutbox     = "outbox"     // {"<seq>": outboxDoc}
	fOutboxN    = "outbox_n"   // number of entries in outbox
	fSpawns     = "spawns"     // {"<seq>": spawnDoc}
	fSpawnsN    = "spawns_n"   // number of entries in spawns
	fProcessed  = "processed"  // [event id, …]
	fTimers     = "timers"     // {encodeKey(path): fire_at}
	fTimerMin   = "timer_min"  // at or before the earliest fire_at in timers; absent when none
	fTrace      = "trace"      // MongoDB: [traceDoc, …]; FerretDB: {"<index>": traceDoc}
	fTraceNext  = "trace_next" // the index the next trace step gets
)

// Env is what an operation runs against.
type Env struct {
	Executions *mongo.Collection
	// Primary is Executions read at the primary's latest state: local read concern, primary
	// read preference. The reads that learn what a write did (a conflict check, a group
	// commit's read-back) use it whatever the store's settings for ordinary reads; nil
	// means Executions. See PrimaryReads.
	Primary *mongo.Collection
	// Durable is Executions read at the primary's majority-committed state, to confirm a
	// write settled without an answer; nil means Primary. See DurableReads.
	Durable  *mongo.Collection
	Counters *mongo.Collection
	Profile  execstore.Profile
	TraceMax int // steps kept in a trace ring; at least 1
	// DedupeWindow, when positive, bounds the dedupe set to the event ids of the last
	// DedupeWindow to 2×DedupeWindow commits; 0 keeps every id. See dedupe.go.
	DedupeWindow int
}

// PrimaryReads returns coll as the reads that settle a write's outcome need it: they must see
// every write the primary has applied, a competitor's as well as the store's own, so they
// read with local read concern from the primary. A majority read could miss a write that is
// applied but not yet majority-committed (and report a lost commit as matching nothing, or a
// won one as lost); a secondary could lag behind both.
func PrimaryReads(coll *mongo.Collection) *mongo.Collection {
	return coll.Clone(options.Collection().
		SetReadConcern(readconcern.Local()).
		SetReadPreference(readpref.Primary()))
}

// DurableReads returns coll reading the primary's majority-committed state: what a failover
// cannot roll back.
func DurableReads(coll *mongo.Collection) *mongo.Collection {
	return coll.Clone(options.Collection().
		SetReadConcern(readconcern.Majority()).
		SetReadPreference(readpref.Primary()))
}

func (e Env) durable() *mongo.Collection {
	if e.Durable != nil {
		return e.Durable
	}
	return e.primary()
}

func (e Env) primary() *mongo.Collection {
	if e.Primary != nil {
		return e.Primary
	}
	return e.Executions
}

// execDoc is the projection of an executions document that loads decode.
type execDoc struct {
	ID           string  `bson:"_id"`
	DefinitionID string  `bson:"definition_id"`
	Status       string  `bson:"status"`
	ParentID     *string `bson:"parent_id"`
	Version      int64   `bson:"version"`
	Data         []byte  `bson:"data"`
	TraceNext    int64   `bson:"trace_next"`
	Hit          bool    `bson:"hit"`
}

// outboxDoc is one outbox entry as stored.
type outboxDoc struct {
	Seq      int64   `bson:"seq"`
	Version  int64   `bson:"v"`
	TargetID *string `bson:"target_id"`
	Event    []byte  `bson:"event"`
}

// spawnDoc is one spawn intent as stored. The context is kept as encoded BSON so that any
// key the caller uses round-trips.
type spawnDoc struct {
	Seq      int64  `bson:"seq"`
	Version  int64  `bson:"v"`
	ChildID  string `bson:"child_id"`
	RootPath string `bson:"root_path"`
	Context  []byte `bson:"context"`
}

// traceDoc is one trace step as stored; the fields are kept as encoded BSON.
type traceDoc struct {
	Index int64  `bson:"index"`
	Step  []byte `bson:"step"`
}

func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
