package opsrun

import (
	"time"

	"github.com/execstore/execstore"
)

// fID is the _id field, the execution id.
const fID = "_id"

// execDoc is the projection of an executions document that loads decode.
type execDoc struct {
	ID           string  `bson:"_id"`
	DefinitionID string  `bson:"definition_id"`
	Status       string  `bson:"status"`
	ParentID     *string `bson:"parent_id"`
	Version      int64   `bson:"version"`
	Data         []byte  `bson:"data"`
	TraceNext    int64   `bson:"trace_next"`
	Hit          bool    `bson:"hit"` // computed by a read: the event asked about is in the dedupe set
}

func (d *execDoc) execution() *execstore.Execution {
	return &execstore.Execution{
		ID:           d.ID,
		DefinitionID: d.DefinitionID,
		Status:       execstore.Status(d.Status),
		ParentID:     deref(d.ParentID),
		Version:      d.Version,
		Data:         nonNil(d.Data),
		TraceNext:    d.TraceNext,
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// utc is t in UTC, as a commit records it; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
