package inspect

import (
	"context"
	"fmt"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/contract"
)

// idemToken is the field of the claim token, which no read here returns.
const idemToken = "claim_token"

// IdemListQuery selects a page of the idempotency records under a key prefix.
type IdemListQuery struct {
	Prefix string
	Limit  int    // page size, 1 to contract.MaxListLimit
	After  string // a cursor a page returned, or a key; "" from the start
}

// IdemPage is one page of the idempotency records under a prefix.
type IdemPage struct {
	Prefix string        `json:"prefix"`
	Items  []*IdemRecord `json:"items"` // as GetIdem reads each, never with a body
	// NextCursor resumes the listing (IdemListQuery.After); absent on the last page.
	NextCursor string `json:"next_cursor,omitempty"`
	Now        string `json:"now"`
	Clock      string `json:"clock"`
}

// prefixRange selects the keys that start with prefix, as idem.Store.List selects them.
var prefixRange = contract.PrefixRange

// idemListFilter is the filter of q's page: the keys under its prefix, after its cursor.
func idemListFilter(q IdemListQuery) bson.D {
	keys := prefixRange(q.Prefix)
	if after := AfterID(q.After); after != "" {
		keys = append(keys, bson.E{Key: "$gt", Value: after})
	}
	return bson.D{{Key: idField, Value: keys}}
}

// ListIdem reads one page of the records of the idem store's collection coll whose key
// starts with the prefix, in key order: the server's clock (local when it gives none), then
// one find on the _id index, limit+1 so that the last page is known without another round
// trip. Unlike idem.Store.List it returns completed records past their retention too, marked
// lapsed. The claim token is left out of the read.
func ListIdem(ctx context.Context, coll *mongo.Collection, q IdemListQuery, local time.Time) (*IdemPage, error) {
	now, clock := ServerNow(ctx, coll.Database(), local)
	cur, err := coll.Find(ctx, idemListFilter(q), options.Find().
		SetProjection(bson.D{{Key: idemToken, Value: 0}}).
		SetSort(bson.D{{Key: idField, Value: 1}}).
		SetLimit(int64(q.Limit)+1))
	if err != nil {
		return nil, fmt.Errorf("listing %q in %s.%s: %w", q.Prefix, coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &IdemPage{Prefix: q.Prefix, Items: []*IdemRecord{}, Now: FormatTime(now), Clock: clock}
	for cur.Next(ctx) {
		key, _ := cur.Current.Lookup(idField).StringValueOK()
		if !strings.HasPrefix(key, q.Prefix) {
			continue
		}
		r.Items = append(r.Items, readIdem(cur.Current, key, now, clock, false))
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("listing %q in %s.%s: %w", q.Prefix, coll.Database().Name(), coll.Name(), err)
	}
	if len(r.Items) > q.Limit {
		r.Items = r.Items[:q.Limit]
		r.NextCursor = contract.EncodeCursor(r.Items[q.Limit-1].Key)
	}
	return r, nil
}
