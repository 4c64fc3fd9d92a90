package execstore_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/internal/testserver"
)

// BenchmarkIndexCost measures what a single-document update by _id costs by the secondary
// indexes on its collection: none; the six the previous version created (outbox, spawns and
// timers by partition, definition, status and parent, each whole); and ops.Indexes as Open
// creates them (opsrun.EnsureIndexes: partial and with composite terms where the server
// builds them). 64 documents of about 1.6 KB, one in four with an outbox entry pending, all
// with a timer, updated from 16 goroutines as an engine's handlers would. On a server that
// stores a document as one row and never updates it in place (DocumentDB), every update adds
// entries to every index whose filter the new version meets; on MongoDB only to the indexes
// whose keys changed.
//
//	go test -run '^$' -bench IndexCost .
func BenchmarkIndexCost(b *testing.B) {
	ctx := context.Background()
	previous := []mongo.IndexModel{
		{Keys: bson.D{{Key: "partition", Value: 1}, {Key: "outbox_n", Value: 1}}},
		{Keys: bson.D{{Key: "partition", Value: 1}, {Key: "spawns_n", Value: 1}}},
		{Keys: bson.D{{Key: "partition", Value: 1}, {Key: "timer_min", Value: 1}}},
		{Keys: bson.D{{Key: "definition_id", Value: 1}, {Key: "_id", Value: 1}}},
		{Keys: bson.D{{Key: "status", Value: 1}, {Key: "_id", Value: 1}}},
		{Keys: bson.D{{Key: "parent_id", Value: 1}, {Key: "_id", Value: 1}}},
	}
	for _, c := range []struct {
		name    string
		current bool
		indexes []mongo.IndexModel
	}{{"none", false, nil}, {"previous", false, previous}, {"current", true, nil}} {
		b.Run(c.name, func(b *testing.B) {
			coll := testserver.Collection(b, srv.URI, testDatabase(b), "indexed")
			for _, m := range c.indexes { // one createIndexes each, as opsrun.EnsureIndexes sends them
				if _, err := coll.Indexes().CreateOne(ctx, m); err != nil {
					b.Fatal(err)
				}
			}
			if c.current {
				if err := opsrun.EnsureIndexes(ctx, opsrun.Env{Executions: coll}); err != nil {
					b.Fatal(err)
				}
			}
			const n = 64
			pad := strings.Repeat("x", 1500)
			for i := range n {
				if _, err := coll.InsertOne(ctx, bson.D{{Key: "_id", Value: fmt.Sprint("e", i)}, {Key: "outbox_n", Value: i % 4 / 3},
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
