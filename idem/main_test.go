package idem

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/testserver"
)

// server is the embedded FerretDB behind its front, or MONGODB_URI when set.
var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

var bg = context.Background()

// testDatabase returns a database name of its own for t.
func testDatabase(t testing.TB) string { return testserver.Database(t, "idem") }

// openStore opens a store on a database of t's own, closed when t ends.
func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Database == "" {
		opts.Database = testDatabase(t)
	}
	s, err := Open(bg, srv.URI, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(bg)) })
	return s
}

// serverIsFerretDB reports whether the test server is FerretDB (the embedded server, or one
// MONGODB_URI names), asked of buildInfo through a client of the test's own: FerretDB's
// answer carries ferretdbVersion, MongoDB's does not.
func serverIsFerretDB(t testing.TB) bool {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI))
	require.NoError(t, err)
	defer client.Disconnect(bg)
	var info struct {
		FerretDBVersion *string `bson:"ferretdbVersion"`
	}
	require.NoError(t, client.Database("admin").RunCommand(bg, bson.D{{Key: "buildInfo", Value: 1}}).Decode(&info))
	return info.FerretDBVersion != nil
}

// rawCollection is s's collection through a client of the test's own, for writing records
// the store would never write.
func rawCollection(t testing.TB, s *Store) *mongo.Collection {
	return testserver.Collection(t, srv.URI, s.opts.Database, s.opts.Collection)
}

const (
	shortLease = 300 * time.Millisecond
	longLease  = time.Minute
	fp         = "fp-1"
)

// serverServesNowInWrites reports whether the test server runs a findAndModify whose update
// pipeline sets a field to $$NOW, as the MongoDB formulation's claim does, shown by the
// result: a document of the test's own, on a database of its own, comes back with a date.
func serverServesNowInWrites(t testing.TB) bool {
	t.Helper()
	coll := testserver.Collection(t, srv.URI, testserver.Database(t, "idem-now"), "probe")
	defer coll.Database().Drop(bg)
	_, err := coll.InsertOne(bg, bson.D{{Key: "_id", Value: "probe"}})
	require.NoError(t, err)
	var got struct {
		At any `bson:"at"`
	}
	err = coll.FindOneAndUpdate(bg, bson.D{{Key: "_id", Value: "probe"}},
		bson.A{bson.D{{Key: "$set", Value: bson.D{{Key: "at", Value: "$$NOW"}}}}},
		options.FindOneAndUpdate().SetReturnDocument(options.After)).Decode(&got)
	if err != nil {
		var ce mongo.CommandError
		require.ErrorAs(t, err, &ce, "refused with an error reply, not lost")
		return false
	}
	_, isDate := got.At.(bson.DateTime)
	require.True(t, isDate, "a served $$NOW is a date, got %#v", got.At)
	return true
}

// claimOnceLapsed claims key with s for longLease once a claim of it has lapsed: it asks every
// 50 ms, for 10 s at most, while the claim is still live. Sleeping the lease's length and a
// margin is not enough: the FerretDB formulation's expiry is by its estimate of the server's
// clock, which may be ahead by half the round trip of its reading, past 100 ms on a loaded
// machine. It returns the last answer, which is a reclaim unless the claim stayed live.
func claimOnceLapsed(t *testing.T, s *Store, key string) Claim {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := s.Claim(bg, key, fp, 1, longLease)
		require.NoError(t, err)
		if c.Outcome != AlreadyClaimed || time.Now().After(deadline) {
			return c
		}
		time.Sleep(50 * time.Millisecond)
	}
}
