package inspect

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/internal/testserver"
)

// The bound is the sampled execution rank places after the cursor, in either direction; a
// sample that does not reach the rank, or whose execution there has no time, gives none.
func TestBoundOf(t *testing.T) {
	at := func(ms int64) *int64 { return &ms }
	sample := []keyset{{At: at(30), ID: "c"}, {ID: "z"}, {At: at(10), ID: "a"}, {At: at(20), ID: "b"}, {At: at(20), ID: "a"}, {ID: "y"}}
	// ascending: y, z (no time), a@10, a@20, b@20, c@30
	for rank, want := range map[int]int64{3: 10, 4: 20, 6: 30} {
		got, ok := boundOf(sample, nil, false, rank)
		require.True(t, ok, rank)
		require.Equal(t, want, got, rank)
	}
	_, ok := boundOf(sample, nil, false, 2)
	require.False(t, ok, "no time at rank 2")
	_, ok = boundOf(sample, nil, false, 7)
	require.False(t, ok, "6 sampled")
	got, ok := boundOf(sample, &keyset{At: at(20), ID: "a"}, false, 1)
	require.True(t, ok)
	require.Equal(t, int64(20), got, "b@20 comes after a@20")
	// descending: c@30, b@20, a@20, a@10, z, y
	got, ok = boundOf(sample, nil, true, 2)
	require.True(t, ok)
	require.Equal(t, int64(20), got)
	got, ok = boundOf(sample, &keyset{At: at(20), ID: "b"}, true, 2)
	require.True(t, ok)
	require.Equal(t, int64(10), got, "after b@20: a@20, a@10")
	_, ok = boundOf(sample, &keyset{At: at(10), ID: "a"}, true, 1)
	require.False(t, ok, "z comes next, with no time")
}

// Paged to its end in every order, a listing by time bounded by its samples returns what an
// in-memory sort of the documents gives, the executions without a time and those sharing a
// time included; on a server with $sample most pages take one sample and one find, answered
// (on one without, the sample fails and one find answers).
func TestBoundedListing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var sent []string
	monitor := &event.CommandMonitor{Succeeded: func(_ context.Context, e *event.CommandSucceededEvent) {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, e.CommandName)
	}}
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI).SetMonitor(monitor))
	require.NoError(t, err)
	defer func() { _ = client.Disconnect(context.WithoutCancel(ctx)) }()
	db := client.Database(testserver.Database(t, "inspect"))
	defer func() { _ = db.Drop(context.WithoutCancel(ctx)) }()
	coll := db.Collection("executions")

	const n = 300
	base := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	var docs []any
	want := map[ListSort][]keyset{}
	for i := range n {
		id := fmt.Sprintf("exe-%03d", (i*7)%n) // ids out of time order
		d := bson.D{{Key: "_id", Value: id}, {Key: "status", Value: "RUNNING"}, {Key: "version", Value: int64(1)}}
		created, updated := base.Add(time.Duration(i)*time.Second), base.Add(time.Duration(i%40)*time.Minute) // 40 shared update times
		if i%25 != 0 {                                                                                        // every 25th without times
			d = append(d, bson.E{Key: "created_at", Value: created}, bson.E{Key: "updated_at", Value: updated})
			c, u := created.UnixMilli(), updated.UnixMilli()
			want[SortByCreated] = append(want[SortByCreated], keyset{At: &c, ID: id})
			want[SortByUpdated] = append(want[SortByUpdated], keyset{At: &u, ID: id})
		} else {
			want[SortByCreated] = append(want[SortByCreated], keyset{ID: id})
			want[SortByUpdated] = append(want[SortByUpdated], keyset{ID: id})
		}
		docs = append(docs, d)
	}
	_, err = coll.InsertMany(ctx, docs)
	require.NoError(t, err)

	_, err = coll.Aggregate(ctx, []bson.D{{{Key: "$sample", Value: bson.D{{Key: "size", Value: 1}}}}})
	hasSample := !opsrun.LacksOperators(err)
	if hasSample {
		require.NoError(t, err)
	}

	for _, by := range []ListSort{SortByCreated, SortByUpdated} {
		for _, desc := range []bool{false, true} {
			expected := slices.Clone(want[by])
			slices.SortFunc(expected, compareAsc)
			if desc {
				slices.Reverse(expected)
			}
			var got []string
			boundedPages := 0
			pages := 0
			after := ""
			for {
				mu.Lock()
				sent = nil
				mu.Unlock()
				p, err := listExecutions(ctx, coll, ListQuery{Sort: by, Desc: desc, Limit: 7, After: after}, 40)
				require.NoError(t, err)
				mu.Lock()
				if slices.Equal(sent, []string{"aggregate", "find"}) {
					boundedPages++
				}
				mu.Unlock()
				pages++
				for _, s := range p.Items {
					got = append(got, s.ID)
				}
				if after = p.NextCursor; after == "" {
					break
				}
				require.Less(t, pages, n, "no last page")
			}
			var ids []string
			for _, k := range expected {
				ids = append(ids, k.ID)
			}
			require.Equal(t, ids, got, "%s desc=%v", by, desc)
			if hasSample {
				require.Greater(t, boundedPages, pages/2, "%s desc=%v: %d of %d pages bounded", by, desc, boundedPages, pages)
			} else {
				require.Zero(t, boundedPages, "%s desc=%v", by, desc)
			}
		}
	}
}
