//go:build !linux

package main

import "os/exec"

// dieWithParent does nothing where there is no parent-death signal: the child still stops
// when its standard input closes, which it does when this process dies.
func dieWithParent(*exec.Cmd) {}

// writeStacksOnSignal does nothing here: there is no SIGUSR1 to ask with.
func writeStacksOnSignal(string) {}

// askForStacks does nothing here.
func askForStacks(*exec.Cmd) {}
