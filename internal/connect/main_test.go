package connect

import (
	"os"
	"testing"

	"github.com/execstore/execstore/internal/testserver"
)

// srv is the embedded FerretDB behind its front, or the server MONGODB_URI names.
var srv *testserver.Server

func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }
