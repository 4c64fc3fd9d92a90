package main

import (
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"syscall"
)

// dieWithParent has the kernel kill cmd's process when this one dies.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// writeStacksOnSignal has this process write every goroutine's stack to path each time it
// receives SIGUSR1 (askForStacks), for a delivery that stalled.
func writeStacksOnSignal(path string) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	go func() {
		for range sig {
			if f, err := os.Create(path); err == nil {
				_ = pprof.Lookup("goroutine").WriteTo(f, 2)
				_ = f.Close()
			}
		}
	}()
}

// askForStacks asks cmd's process to write its goroutines' stacks (writeStacksOnSignal).
func askForStacks(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(syscall.SIGUSR1)
	}
}
