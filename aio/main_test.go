package aio_test

import (
	"os"
	"testing"

	"github.com/execstore/execstore/internal/testserver"
)

// server is the server the store's tests run against: the embedded FerretDB behind its
// write-serializing front, or MONGODB_URI when set. The tests of package aio itself (the
// group commit's pipeline, the snapshot cache) need none and ignore it.
var srv *testserver.Server

// TestMain starts the server, runs the tests and checks that no goroutine was left behind.
func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

// testDatabase returns a database name of its own for t.
func testDatabase(t testing.TB) string { return testserver.Database(t, "aio") }
