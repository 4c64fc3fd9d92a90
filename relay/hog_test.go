package relay_test

import (
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/cpuhog"
)

// hogBound is how long the CPU hogs of a test under load may live: they end by themselves
// then, whatever the test does, and its cleanup kills them before.
const hogBound = 3 * time.Minute

// startHogs starts one CPU hog per core (TestCPUHogChild, the test binary started again),
// which t's cleanup kills.
func startHogs(t *testing.T) *cpuhog.Hogs {
	h, err := cpuhog.Start(0, hogBound, func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCPUHogChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), "MONGODB_URI="+srv.URI) // its TestMain starts no server
		return cmd
	})
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	return h
}

// TestCPUHogChild is a CPU hog of a test under load: it runs only when started by
// startHogs, and keeps one core busy until its deadline or its standard input's EOF.
func TestCPUHogChild(t *testing.T) {
	if cpuhog.Child() {
		require.NoError(t, cpuhog.Spin())
	}
}
