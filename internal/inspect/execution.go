package inspect

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/ops"
)

// ExecutionQuery names the execution ReadExecution reads and how much of it.
type ExecutionQuery struct {
	ID     string
	Trace  int  // how many of the last trace steps to keep; 0 for none
	Dedupe bool // list the dedupe set's event ids, not only their number
}

// Execution is one execution: its snapshot, pending entries and intents, timers, dead items,
// the last trace steps and its dedupe set.
type Execution struct {
	ID         string `json:"id"`
	Definition string `json:"definition,omitempty"`
	Status     string `json:"status"`
	Parent     string `json:"parent,omitempty"` // absent for a root
	Version    int64  `json:"version"`
	TraceNext  int64  `json:"trace_next"`
	// CreatedAt and UpdatedAt are as ExecutionSummary's: absent from a document written
	// before the store stamped them.
	CreatedAt string  `json:"created_at,omitempty"`
	UpdatedAt string  `json:"updated_at,omitempty"`
	Data      Payload `json:"data"`
	Now       string  `json:"now"` // what timers are measured from

	Outbox []OutboxEntry `json:"outbox"`
	Timers []Timer       `json:"timers"`
	Spawns []SpawnEntry  `json:"spawns"`
	// TraceKept is how many steps the execution keeps; Trace holds the last of them.
	TraceKept int         `json:"trace_kept"`
	Trace     []TraceStep `json:"trace"`
	// DedupeSize is the number of event ids in the dedupe set; Dedupe lists them only when
	// asked (ExecutionQuery.Dedupe), else it is absent.
	DedupeSize int      `json:"dedupe_size"`
	Dedupe     []string `json:"dedupe,omitzero"`
	// Dead are the execution's dead items, absent when it has none.
	Dead []DeadItem `json:"dead,omitempty"`
}

// NotFoundError is what the readers return for an id or key no document has.
type NotFoundError struct {
	What, ID  string
	Namespace string // database.collection
}

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("no %s %q in %s", e.What, e.ID, e.Namespace)
}

// notFound says that no document of what has id in coll.
func notFound(what, id string, coll *mongo.Collection) error {
	return &NotFoundError{What: what, ID: id, Namespace: coll.Database().Name() + "." + coll.Name()}
}

// ReadExecution reads one execution of the executions collection coll, its timers judged at
// now: one find by _id. An unknown id is a *NotFoundError.
func ReadExecution(ctx context.Context, coll *mongo.Collection, q ExecutionQuery, now time.Time) (*Execution, error) {
	doc, err := coll.FindOne(ctx, bson.D{{Key: idField, Value: q.ID}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, notFound("execution", q.ID, coll)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %q from %s.%s: %w", q.ID, coll.Database().Name(), coll.Name(), err)
	}
	_, data, _ := doc.Lookup(ops.FieldData).BinaryOK()
	r := &Execution{
		ID:         q.ID,
		Definition: str(doc, ops.FieldDefinitionID),
		Status:     str(doc, ops.FieldStatus),
		Parent:     str(doc, ops.FieldParentID),
		Version:    integer(doc, ops.FieldVersion),
		TraceNext:  integer(doc, ops.FieldTraceNext),
		CreatedAt:  dateOf(doc, ops.FieldCreatedAt),
		UpdatedAt:  dateOf(doc, ops.FieldUpdatedAt),
		Data:       describePayload(data),
		Now:        FormatTime(now),
	}
	if r.Outbox, err = outboxOf(doc); err != nil {
		return nil, err
	}
	if r.Timers, err = timersOf(doc, now); err != nil {
		return nil, err
	}
	if r.Spawns, err = spawnsOf(doc); err != nil {
		return nil, err
	}
	if r.Dead, err = deadOf(doc); err != nil {
		return nil, err
	}
	trace, err := traceOf(doc)
	if err != nil {
		return nil, err
	}
	r.TraceKept = len(trace)
	r.Trace = trace[max(0, len(trace)-q.Trace):]
	ids := dedupeOf(doc)
	r.DedupeSize = len(ids)
	if q.Dedupe {
		r.Dedupe = ids
	}
	// Empty lists are [] in JSON, so that scripts need not tell null from none.
	r.Outbox, r.Timers, r.Spawns, r.Trace = nonNil(r.Outbox), nonNil(r.Timers), nonNil(r.Spawns), nonNil(r.Trace)
	if q.Dedupe {
		r.Dedupe = nonNil(r.Dedupe)
	}
	return r, nil
}

// nonNil returns s, or an empty slice for nil.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
