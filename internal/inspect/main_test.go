package inspect

import (
	"os"
	"testing"

	"github.com/execstore/execstore/internal/testserver"
)

// srv is the server the tests that read one use: the embedded FerretDB behind its front in a
// child process, or MONGODB_URI when set.
var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }
