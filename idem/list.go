package idem

import (
	"context"
	"slices"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/idemcheck"
	"github.com/execstore/execstore/internal/outcome"
)

// List returns up to limit records whose key starts with prefix, in key order (limit 0: all
// of them). Each is as Get returns it, judged by the server's clock at the read: a claim past
// its lease has Lapsed set, and a completed record past its retention is left out. It is one
// read served by the _id index. Relays use it to see which of them are alive. An empty
// prefix or a negative limit is execstore.ErrInvalid before any I/O.
//
// With limit 0 the server returns the records in no order and List sorts them: a sort would
// make a DocumentDB server keep the command's backend connection for a cursor and close it
// after, and the next command wait for a new one; relays list their leases at every look.
func (s *Store) List(ctx context.Context, prefix string, limit int) ([]Record, error) {
	if err := idemcheck.Key(prefix); err != nil {
		return nil, err
	}
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	return submit(ctx, s, opList, prefix, func(ctx context.Context) ([]Record, error) {
		return s.form.list(ctx, prefix, limit)
	})
}

// prefixRange selects the keys that start with prefix (contract.PrefixRange).
func prefixRange(prefix string) bson.D {
	return bson.D{{Key: "_id", Value: contract.PrefixRange(prefix)}}
}

// listSort is the server's order for a List of up to limit records: by key, unless all of
// them are read (limit 0), which decodeList sorts.
func listSort(limit int) bson.D {
	if limit == 0 {
		return nil
	}
	return bson.D{{Key: "_id", Value: 1}}
}

// decodeList decodes the records of cur that start with prefix, judging expiry with isLapsed,
// in key order: cur is in key order unless limit is 0 (listSort).
func decodeList(ctx context.Context, cur *mongo.Cursor, prefix string, limit int, isLapsed func(raw bson.Raw) func(time.Time) bool) ([]Record, error) {
	defer cur.Close(context.WithoutCancel(ctx))
	var out []Record
	for cur.Next(ctx) {
		if key, _ := cur.Current.Lookup("_id").StringValueOK(); !strings.HasPrefix(key, prefix) {
			continue
		}
		if rec := liveRecord(cur.Current, isLapsed(cur.Current)); rec != nil {
			out = append(out, *rec)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	if err := cur.Err(); err != nil {
		return nil, outcome.ReadFailureOf(outcome.NounIdempotencyKey, "list", prefix, err)
	}
	if limit == 0 {
		slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.Key, b.Key) })
	}
	return out, nil
}

func (m *mongoForm) list(ctx context.Context, prefix string, limit int) ([]Record, error) {
	pipeline := bson.A{bson.D{{Key: "$match", Value: prefixRange(prefix)}}}
	if sort := listSort(limit); sort != nil {
		pipeline = append(pipeline, bson.D{{Key: "$sort", Value: sort}})
	}
	pipeline = append(pipeline, bson.D{{Key: "$set", Value: bson.D{{Key: fNow, Value: "$$NOW"}}}})
	cur, err := m.coll.Aggregate(ctx, pipeline)
	if err != nil {
		return nil, outcome.ReadFailureOf(outcome.NounIdempotencyKey, "list", prefix, err)
	}
	return decodeList(ctx, cur, prefix, limit, func(raw bson.Raw) func(time.Time) bool {
		now, _ := raw.Lookup(fNow).DateTimeOK()
		return func(u time.Time) bool { return time.UnixMilli(now).After(u) }
	})
}

func (f *ferretForm) list(ctx context.Context, prefix string, limit int) ([]Record, error) {
	now, eps, err := f.clock.current(ctx)
	if err != nil {
		return nil, err
	}
	find := options.Find()
	if sort := listSort(limit); sort != nil {
		find.SetSort(sort)
	}
	cur, err := f.coll.Find(ctx, prefixRange(prefix), find)
	if err != nil {
		return nil, outcome.ReadFailureOf(outcome.NounIdempotencyKey, "list", prefix, err)
	}
	return decodeList(ctx, cur, prefix, limit, func(bson.Raw) func(time.Time) bool {
		return func(u time.Time) bool { return lapsed(u, now, eps) }
	})
}
