package execstore_test

import (
	"context"
	"fmt"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/internal/testserver"
)

// BenchmarkFilterShape measures what a single-document update costs by the shape of its
// filter, on a collection of 1,000 small documents, targeting the last ones inserted (a scan
// that stops at its first match finds an early document fast). On the embedded server only a
// filter of exactly {_id} is served from the primary key; every other shape reads the
// collection. The store's guarded writes (a commit's version and dedupe guards, an ack's entry
// guard, a timer delete's fire-time guard) all have the second shape.
//
//	go test -run '^$' -bench FilterShape .
func BenchmarkFilterShape(b *testing.B) {
	ctx := context.Background()
	coll := testserver.Collection(b, srv.URI, testDatabase(b), "shapes")
	const n = 1000
	docs := make([]any, n)
	for i := range docs {
		docs[i] = bson.D{{Key: "_id", Value: fmt.Sprint("id", i)}, {Key: "version", Value: int64(1)},
			{Key: "processed", Value: bson.A{"a", "b"}}, {Key: "data", Value: make([]byte, 200)}}
	}
	if _, err := coll.InsertMany(ctx, docs); err != nil {
		b.Fatal(err)
	}
	id := func(i int) string { return fmt.Sprint("id", n-1-i%32) }
	for _, shape := range []struct {
		name   string
		filter func(i int) bson.D
	}{
		{"id", func(i int) bson.D { return bson.D{{Key: "_id", Value: id(i)}} }},
		{"id+version", func(i int) bson.D {
			return bson.D{{Key: "_id", Value: id(i)}, {Key: "version", Value: int64(1)}}
		}},
		{"id+version+dedupe", func(i int) bson.D {
			return bson.D{{Key: "_id", Value: id(i)}, {Key: "version", Value: int64(1)},
				{Key: "processed", Value: bson.D{{Key: "$ne", Value: "c"}}}}
		}},
		{"id_in", func(i int) bson.D {
			return bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: bson.A{id(i)}}}}}
		}},
	} {
		b.Run(shape.name, func(b *testing.B) {
			i := 0
			for b.Loop() {
				res, err := coll.UpdateOne(ctx, shape.filter(i), bson.D{{Key: "$set", Value: bson.D{{Key: "z", Value: i}}}})
				if err != nil || res.MatchedCount != 1 {
					b.Fatal(err, res)
				}
				i++
			}
		})
	}
}
