package cpuhog_test

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/internal/cpuhog"
)

// TestHogChild is a hog of the tests below: it runs only when started by them.
func TestHogChild(t *testing.T) {
	if cpuhog.Child() {
		require.NoError(t, cpuhog.Spin())
	}
}

func hogCmd() *exec.Cmd {
	return exec.Command(os.Args[0], "-test.run=^TestHogChild$", "-test.count=1")
}

// cpuOfChildren is the CPU time this process's waited-for children used.
func cpuOfChildren(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Hogs end by themselves at their deadline, having used CPU meanwhile.
func TestHogsEndAtTheirDeadline(t *testing.T) {
	before := cpuOfChildren(t)
	h, err := cpuhog.Start(2, 500*time.Millisecond, hogCmd)
	require.NoError(t, err)
	t.Cleanup(h.Stop)
	require.Equal(t, 2, h.Len())
	select {
	case <-h.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the hogs did not end by themselves")
	}
	require.Greater(t, cpuOfChildren(t)-before, time.Duration(0), "CPU time of the hogs")
}

// Stop kills the hogs well before their deadline.
func TestStopKillsTheHogs(t *testing.T) {
	h, err := cpuhog.Start(0, time.Hour, hogCmd)
	require.NoError(t, err)
	h.Stop()
	h.Stop()
}

// Spin refuses to run in a process that is not a hog.
func TestSpinOutsideAHog(t *testing.T) {
	if !cpuhog.Child() {
		require.Error(t, cpuhog.Spin())
	}
}
