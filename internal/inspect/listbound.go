package inspect

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/opsrun"
)

// A listing by time with no index to serve it reads the whole collection, and on
// FerretDB 2.5 / DocumentDB most of its time goes to sorting what it read (docs/ui.md). So a
// listing by time whose only filter is its cursor first samples the collection ($sample) and
// bounds its find to the executions at or before the sampled one listBoundRank places into
// the page's order (after the cursor): every execution the bound leaves out comes after every
// one it keeps, so when the bounded find fills the page it is the page the unbounded find
// would return, and when it does not, the listing runs the unbounded find. A server without
// $sample, a collection smaller than the sample, or a sample that does not reach the bound
// rank gets the unbounded find alone.
const (
	listSampleSize = 1000
	// listBoundRank is the sampled execution that bounds the find: with 1,000 of 100,000
	// sampled, the bound keeps about 1,500 executions, and a page of 100 outruns it only when
	// 15 of the 1,000 fall among the first 101, about never.
	listBoundRank = 15
)

// bounded reports whether q's listing is one a sample may bound: by a time, with no filter
// but its cursor.
func bounded(q ListQuery) bool {
	return q.Sort.byTime() && len(q.Statuses) == 0 && q.Definition == "" && q.Parent == "" && !q.Roots
}

// sampledBound samples size executions of coll and returns the filter of those at or before
// the bound in q's order (see above), or false when the sample gives none.
func sampledBound(ctx context.Context, coll *mongo.Collection, q ListQuery, size int) (bson.E, bool, error) {
	var after *keyset
	if q.After != "" {
		k, err := decodeKeyset(q.After, q.Sort, q.Desc)
		if err != nil {
			return bson.E{}, false, err
		}
		after = &k
	}
	field := q.Sort.field()
	cur, err := coll.Aggregate(ctx, []bson.D{
		{{Key: "$sample", Value: bson.D{{Key: "size", Value: size}}}},
		{{Key: "$project", Value: bson.D{{Key: field, Value: 1}}}},
	}, options.Aggregate().SetBatchSize(int32(size))) // one reply, no getMore
	if opsrun.LacksOperators(err) { // FerretDB 1.x: $sample is NotImplemented
		return bson.E{}, false, nil
	}
	if err != nil {
		return bson.E{}, false, fmt.Errorf("sampling %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	var sample []keyset
	for cur.Next(ctx) {
		k := keyset{ID: str(cur.Current, idField)}
		if ms, ok := cur.Current.Lookup(field).DateTimeOK(); ok {
			k.At = &ms
		}
		sample = append(sample, k)
	}
	if err := cur.Err(); err != nil {
		return bson.E{}, false, fmt.Errorf("sampling %s.%s: %w", coll.Database().Name(), coll.Name(), err)
	}
	if len(sample) < size {
		return bson.E{}, false, nil // the whole collection, or nearly: small enough to sort
	}
	at, ok := boundOf(sample, after, q.Desc, listBoundRank)
	if !ok {
		return bson.E{}, false, nil
	}
	return boundFilter(field, time.UnixMilli(at).UTC(), q.Desc), true, nil
}

// boundOf returns the time of the sampled execution rank places after the cursor after (nil:
// from the start) in the order (descending: desc), or false when fewer come after it, or
// when it has no time.
func boundOf(sample []keyset, after *keyset, desc bool, rank int) (int64, bool) {
	order := func(a, b keyset) int {
		if desc {
			return compareAsc(b, a)
		}
		return compareAsc(a, b)
	}
	var next []keyset
	for _, k := range sample {
		if after == nil || order(k, *after) > 0 {
			next = append(next, k)
		}
	}
	if len(next) < rank {
		return 0, false
	}
	slices.SortFunc(next, order)
	b := next[rank-1]
	if b.At == nil {
		return 0, false
	}
	return *b.At, true
}

// compareAsc orders two executions as an ascending listing by time does (listorder.go): no
// time first, by _id; then by time, then _id.
func compareAsc(a, b keyset) int {
	switch {
	case a.At == nil && b.At == nil:
		return cmp.Compare(a.ID, b.ID)
	case a.At == nil:
		return -1
	case b.At == nil:
		return 1
	}
	return cmp.Or(cmp.Compare(*a.At, *b.At), cmp.Compare(a.ID, b.ID))
}

// boundFilter selects the executions at or before time at in the order by field (descending:
// desc): descending, those at or after it; ascending, those at or before it and those with
// no time, which come first.
func boundFilter(field string, at time.Time, desc bool) bson.E {
	if desc {
		return bson.E{Key: field, Value: bson.D{{Key: "$gte", Value: at}}}
	}
	return bson.E{Key: "$and", Value: bson.A{bson.D{{Key: "$or", Value: bson.A{
		bson.D{{Key: field, Value: nil}},
		bson.D{{Key: field, Value: bson.D{{Key: "$lte", Value: at}}}},
	}}}}}
}
