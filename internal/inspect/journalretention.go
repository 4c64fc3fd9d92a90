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

// journalRetentionKey is the key under the counting document's deleted field where the
// journal's retention counts the invocations it deleted (journal.RetentionTotals).
const journalRetentionKey = "invocations"

// JournalRetention is what the journal's retention deleted from its collection since the
// journal's data was created, and when it last did, by the deleter's clock (absent for
// never).
type JournalRetention struct {
	Collection string `json:"collection"`
	Deleted    int64  `json:"deleted"`
	LastAt     string `json:"last_at,omitempty"`
}

// ReadJournalRetention reads the retention totals of the journal collection journal from the
// counters collection of its database: one find by _id. No document means nothing deleted.
func ReadJournalRetention(ctx context.Context, counters *mongo.Collection, journal string) (*JournalRetention, error) {
	r := &JournalRetention{Collection: journal}
	doc, err := counters.FindOne(ctx, bson.D{{Key: idField, Value: ops.RetentionID(journal)}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the retention totals of %s.%s: %w", counters.Database().Name(), journal, err)
	}
	if v, err := doc.LookupErr(ops.FieldRetentionDeleted, journalRetentionKey); err == nil {
		r.Deleted, _ = v.AsInt64OK()
	}
	if ms, ok := doc.Lookup(ops.FieldRetentionLastAt).DateTimeOK(); ok {
		r.LastAt = FormatTime(time.UnixMilli(ms).UTC())
	}
	return r, nil
}
