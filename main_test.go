package execstore_test

import (
	"os"
	"testing"

	"github.com/execstore/execstore/internal/testserver"
)

// server is the server the conformance suite runs against: the embedded FerretDB behind its
// write-serializing front, or MONGODB_URI when set.
var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

// testDatabase returns a database name of its own for t.
func testDatabase(t testing.TB) string { return testserver.Database(t, "t") }
