//go:build !unix

package relay_test

import "os/exec"

// askToQuit does nothing where there is no SIGQUIT.
func askToQuit(*exec.Cmd) {}
