package idem

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/goleak"

	"github.com/execstore/execstore/internal/testserver"
)

// server is the embedded FerretDB behind its front, or MONGODB_URI when set.
var server *testserver.Server

func TestMain(m *testing.M) {
	code := testserver.Main(m, &server)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var bg = context.Background()

var dbCounter atomic.Int64

var unsafeDBChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// testDatabase returns a database name of its own for t.
func testDatabase(t testing.TB) string {
	name := unsafeDBChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("idem%d_%s", dbCounter.Add(1), name)
}

// openStore opens a store on a database of t's own, closed when t ends.
func openStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Database == "" {
		opts.Database = testDatabase(t)
	}
	s, err := Open(bg, server.URI, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close(bg)) })
	return s
}

// rawCollection is s's collection through a client of the test's own, for writing records
// the store would never write.
func rawCollection(t testing.TB, s *Store) *mongo.Collection {
	t.Helper()
	c, err := mongo.Connect(options.Client().ApplyURI(server.URI))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Disconnect(bg) })
	return c.Database(s.opts.Database).Collection(s.opts.Collection)
}

const (
	shortLease = 300 * time.Millisecond
	longLease  = time.Minute
	fp         = "fp-1"
)
