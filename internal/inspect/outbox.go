package inspect

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/ops"
)

// Outbox is the oldest pending outbox entries across executions, by seq: the seq orders
// entries globally, the version within their execution.
type Outbox struct {
	Pending    int           `json:"pending"`    // entries pending in all
	Executions int           `json:"executions"` // executions holding them
	Entries    []OutboxEntry `json:"entries"`    // the oldest limit of them, by seq
}

// ReadOutbox reads the oldest limit pending entries of the executions collection coll: one
// find of the executions that hold any (ops.PendingOutboxFilter), projecting only the outbox.
// Every pending entry is read, since seqs live inside the documents. No index serves the
// filter alone (the stores' scan indexes lead with the partition), so the server reads the
// whole collection.
func ReadOutbox(ctx context.Context, coll *mongo.Collection, limit int) (*Outbox, error) {
	cur, err := coll.Find(ctx, ops.PendingOutboxFilter(),
		options.Find().SetProjection(bson.D{{Key: ops.FieldOutbox, Value: 1}}))
	if err != nil {
		return nil, fmt.Errorf("reading the outbox of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &Outbox{}
	var all []OutboxEntry
	for cur.Next(ctx) {
		entries, err := outboxOf(cur.Current)
		if err != nil {
			return nil, fmt.Errorf("execution %q: %w", str(cur.Current, idField), err)
		}
		if len(entries) == 0 {
			continue
		}
		r.Executions++
		for _, e := range entries {
			e.Source = str(cur.Current, idField)
			all = append(all, e)
		}
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("reading the outbox of %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	slices.SortFunc(all, func(a, b OutboxEntry) int {
		return cmp.Or(cmp.Compare(a.Seq, b.Seq), cmp.Compare(a.Source, b.Source))
	})
	r.Pending = len(all)
	r.Entries = nonNil(all[:min(len(all), limit)])
	return r, nil
}
