package journal

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
)

// server is the embedded FerretDB behind its front, or MONGODB_URI when set.
var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

var bg = context.Background()

// testRing is the key ring of the tests that do not rotate keys.
var testRing = mustRing(NewKey("test-1"))

func mustRing(primary Key, older ...Key) *KeyRing {
	r, err := NewKeyRing(primary, older...)
	if err != nil {
		panic(err)
	}
	return r
}

// testOptions returns options on a database of t's own. The embedded server is a single
// node, where w: "majority" means that node: the tests opt in to it explicitly.
func testOptions(t testing.TB) Options {
	return Options{Connection: server.Connection{Database: testserver.Database(t, "journal")}, AcceptWeakDurability: true}
}

// openJournal opens a journal with c (testRing when nil), closed when t ends.
func openJournal(t testing.TB, c Cipher, opts Options) *Journal {
	t.Helper()
	if c == nil {
		c = testRing
	}
	j, err := Open(bg, srv.URI, c, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, j.Close(bg)) })
	return j
}

// rawCollection is j's collection through a client of the test's own, for reading and
// altering documents the journal would never write.
func rawCollection(t testing.TB, j *Journal) *mongo.Collection {
	return testserver.Collection(t, srv.URI, j.opts.Database, j.opts.Collection)
}

// rawSet overwrites fields of invocation id's stored document.
func rawSet(t testing.TB, coll *mongo.Collection, id string, set bson.D) {
	t.Helper()
	res, err := coll.UpdateOne(bg, bson.D{{Key: "_id", Value: id}}, bson.D{{Key: "$set", Value: set}})
	require.NoError(t, err)
	require.EqualValues(t, 1, res.MatchedCount)
}

// rawDoc reads invocation id's stored document.
func rawDoc(t testing.TB, coll *mongo.Collection, id string) document {
	t.Helper()
	var d document
	require.NoError(t, coll.FindOne(bg, bson.D{{Key: "_id", Value: id}}).Decode(&d))
	return d
}

func ident(id string) Identity {
	return Identity{ID: id, Scope: "tenant-a/tools", Digest: "sha256:" + id}
}

// bsonD builds a bson.D from key, value pairs.
func bsonD(kv ...any) bson.D {
	var d bson.D
	for i := 0; i < len(kv); i += 2 {
		d = append(d, bson.E{Key: kv[i].(string), Value: kv[i+1]})
	}
	return d
}
