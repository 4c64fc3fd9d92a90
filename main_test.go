package execstore_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/execstore/execstore/internal/testserver"
)

// server is the server the conformance suite runs against: the embedded FerretDB behind its
// write-serializing front, or MONGODB_URI when set.
var server *testserver.Server

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	srv, err := testserver.Start(ctx)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test server:", err)
		os.Exit(1)
	}
	server = srv
	code := m.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test server:", err)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

var dbCounter atomic.Int64

var unsafeDBChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// testDatabase returns a database name of its own for t.
func testDatabase(t testing.TB) string {
	name := unsafeDBChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 40 {
		name = name[:40]
	}
	return fmt.Sprintf("t%d_%s", dbCounter.Add(1), name)
}
