//go:build unix

package relay_test

import (
	"os/exec"
	"syscall"
)

// askToQuit sends cmd's process SIGQUIT: a Go program prints every goroutine's stack and
// exits.
func askToQuit(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGQUIT)
	}
}
