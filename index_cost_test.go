package execstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/testserver"
)

// BenchmarkIndexCost measures what a single-document update by _id costs by the secondary
// indexes on its collection: none; the six an aio executions collection has (ops/indexes.go:
// outbox_by_partition, spawns_by_partition, timers_by_partition, each led by the partition,
// list_definition, list_status, list_parent); and the same six with the outbox, spawns and
// list_parent indexes partial, so that a document with nothing pending and no parent has no
// entry in them. 64 documents of about 1.6 KB, updated from 16 goroutines as an engine's
// handlers would. On a server that stores a document as one row and never updates it in place
// (DocumentDB), every update adds an entry to every index whose predicate the new version
// meets; on MongoDB only to the indexes whose keys changed.
//
//	go test -run '^$' -bench IndexCost .
func BenchmarkIndexCost(b *testing.B) {
	ctx := context.Background()
	gt0 := func(f string) *options.IndexOptionsBuilder {
		return options.Index().SetPartialFilterExpression(bson.D{{Key: f, Value: bson.D{{Key: "$gt", Value: 0}}}})
	}
	six := func(partial bool) []mongo.IndexModel {
		outbox, spawns, parent := options.Index(), options.Index(), options.Index()
		if partial {
			outbox, spawns = gt0("outbox_n"), gt0("spawns_n")
			parent = options.Index().SetPartialFilterExpression(bson.D{{Key: "parent_id", Value: bson.D{{Key: "$exists", Value: true}}}})
		}
		return []mongo.IndexModel{
			{Keys: bson.D{{Key: "partition", Value: 1}, {Key: "outbox_n", Value: 1}}, Options: outbox},
			{Keys: bson.D{{Key: "partition", Value: 1}, {Key: "spawns_n", Value: 1}}, Options: spawns},
			{Keys: bson.D{{Key: "partition", Value: 1}, {Key: "timer_min", Value: 1}}},
			{Keys: bson.D{{Key: "definition_id", Value: 1}, {Key: "_id", Value: 1}}},
			{Keys: bson.D{{Key: "status", Value: 1}, {Key: "_id", Value: 1}}},
			{Keys: bson.D{{Key: "parent_id", Value: 1}, {Key: "_id", Value: 1}}, Options: parent},
		}
	}
	for _, c := range []struct {
		name    string
		indexes []mongo.IndexModel
	}{{"none", nil}, {"six", six(false)}, {"six-partial", six(true)}} {
		b.Run(c.name, func(b *testing.B) {
			coll := testserver.Collection(b, srv.URI, testDatabase(b), "indexed")
			for _, m := range c.indexes { // one createIndexes each, as ops.EnsureIndexes sends them
				_, err := coll.Indexes().CreateOne(ctx, m)
				var refused mongo.CommandError
				if err != nil && m.Options != nil && errors.As(err, &refused) {
					b.Skipf("the server refuses this index (FerretDB 1.x has no partial indexes): %v", err)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
			const n = 64
			pad := strings.Repeat("x", 1500)
			for i := range n {
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprint("e", i)}, {Key: "outbox_n", Value: 0},
					{Key: "spawns_n", Value: 0}, {Key: "timer_min", Value: 1.5}, {Key: "definition_id", Value: "d"},
					{Key: "status", Value: "RUNNING"}, {Key: "version", Value: 1}, {Key: "partition", Value: int32(i % 8)},
					{Key: "pad", Value: pad}}); err != nil {
					b.Fatal(err)
				}
			}
			var next atomic.Int64
			b.SetParallelism(8) // 16 goroutines on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					i := next.Add(1)
					res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprint("e", i%n)}},
						bson.D{{Key: "$inc", Value: bson.D{{Key: "version", Value: 1}}},
							{Key: "$set", Value: bson.D{{Key: "timer_min", Value: float64(i)}}}})
					if err != nil || res.MatchedCount != 1 {
						b.Error(err, res)
						return
					}
				}
			})
		})
	}
}
