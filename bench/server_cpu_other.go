//go:build !linux

package main

import (
	"errors"
	"time"
)

// cpu is not measured where there is no /proc/PID/stat.
func (p serverProcesses) cpu() (time.Duration, error) {
	return 0, errors.ErrUnsupported
}
