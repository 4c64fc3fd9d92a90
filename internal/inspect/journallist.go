package inspect

import (
	"context"
	"fmt"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/contract"
)

// The attempt states an invocation's latest attempt can be in (package journal's
// plaintext flags): none handed out, one handed out with no receipt, or its receipt's outcome.
var InvocationStates = []string{"none", "pending", "succeeded", "failed", "unknown"}

// InvocationQuery selects a page of journal invocations.
type InvocationQuery struct {
	State string // one of InvocationStates; "" for any
	Owner string // "" for any owner
	Limit int    // page size, 1 to contract.MaxListLimit
	After string // a cursor a page returned, or an invocation id; "" from the start
}

// InvocationPage is one page of invocations.
type InvocationPage struct {
	Items      []InvocationSummary `json:"items"`
	NextCursor string              `json:"next_cursor,omitempty"` // absent on the last page
}

// InvocationSummary is one invocation in a listing: its plaintext metadata, never a sealed
// payload. The journal records no time for a claim or an attempt handed out: ReceiptAt, the
// server's time of the latest receipt, is the only time it keeps.
type InvocationSummary struct {
	ID        string `json:"id"`
	Scope     string `json:"scope"`
	Owner     string `json:"owner"`
	Revision  int64  `json:"revision"`
	Phase     string `json:"phase,omitempty"` // the last checkpoint's; absent before the first
	Attempts  int64  `json:"attempts"`
	Latest    string `json:"latest"`
	NoReplay  bool   `json:"no_replay"`
	ReceiptAt string `json:"receipt_at,omitempty"`
}

// ValidInvocationState reports whether s may be an InvocationQuery's State.
func ValidInvocationState(s string) bool {
	for _, v := range InvocationStates {
		if s == v {
			return true
		}
	}
	return s == ""
}

// ListInvocations reads one page of the journal's collection coll, in id order: one find
// sorted by _id, limit+1 so that the last page is known without another round trip. The
// state and owner are plaintext fields no index leads with: a filter on them reads the
// collection in id order, bounded by the page's limit when enough match.
func ListInvocations(ctx context.Context, coll *mongo.Collection, q InvocationQuery) (*InvocationPage, error) {
	f := bson.D{}
	if id := AfterID(q.After); id != "" {
		f = append(f, bson.E{Key: idField, Value: bson.D{{Key: "$gt", Value: id}}})
	}
	if q.State != "" {
		f = append(f, bson.E{Key: "latest", Value: q.State})
	}
	if q.Owner != "" {
		f = append(f, bson.E{Key: "owner", Value: q.Owner})
	}
	cur, err := coll.Find(ctx, f, options.Find().
		SetProjection(bson.D{{Key: "scope", Value: 1}, {Key: "owner", Value: 1}, {Key: "rev", Value: 1},
			{Key: "ckpt.phase", Value: 1}, {Key: "attempts", Value: 1}, {Key: "latest", Value: 1},
			{Key: "no_replay", Value: 1}, {Key: "receipt_at", Value: 1}}).
		SetSort(bson.D{{Key: idField, Value: 1}}).
		SetLimit(int64(q.Limit)+1))
	if err != nil {
		return nil, fmt.Errorf("listing %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &InvocationPage{Items: []InvocationSummary{}}
	for cur.Next(ctx) {
		var d struct {
			ID        string                  `bson:"_id"`
			Scope     string                  `bson:"scope"`
			Owner     string                  `bson:"owner"`
			Rev       int64                   `bson:"rev"`
			Ckpt      *struct{ Phase string } `bson:"ckpt"`
			Attempts  int64                   `bson:"attempts"`
			Latest    string                  `bson:"latest"`
			NoReplay  bool                    `bson:"no_replay"`
			ReceiptAt *time.Time              `bson:"receipt_at"`
		}
		if err := cur.Decode(&d); err != nil {
			return nil, fmt.Errorf("listing %s.%s: %w", coll.Database().Name(), coll.Name(), err)
		}
		s := InvocationSummary{ID: d.ID, Scope: d.Scope, Owner: d.Owner, Revision: d.Rev, Attempts: d.Attempts,
			Latest: d.Latest, NoReplay: d.NoReplay}
		if d.Ckpt != nil {
			s.Phase = d.Ckpt.Phase
		}
		if d.ReceiptAt != nil {
			s.ReceiptAt = FormatTime(*d.ReceiptAt)
		}
		r.Items = append(r.Items, s)
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("listing %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	if len(r.Items) > q.Limit {
		r.Items = r.Items[:q.Limit]
		r.NextCursor = contract.EncodeCursor(r.Items[q.Limit-1].ID)
	}
	return r, nil
}
