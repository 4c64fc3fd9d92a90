package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A relay process asked for its stacks writes every goroutine's stack beside its log.
func TestStacksWrittenOnSignal(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r1.log.stacks")
	writeStacksOnSignal(path)
	require.NoError(t, syscall.Kill(os.Getpid(), syscall.SIGUSR1))
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), "TestStacksWrittenOnSignal")
	}, 10*time.Second, 10*time.Millisecond, "the stacks, this test's among them")
}
