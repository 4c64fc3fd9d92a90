package main

import (
	"errors"
	"os"
	"strconv"
	"time"
)

// cpu returns the CPU time the server's processes have used so far, read from /proc. A
// process that ends while /proc is read is left out: its time went to its parent's.
func (p serverProcesses) cpu() (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	all := map[int]procStat{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		if all[pid], err = parseProcStat(string(b)); err != nil {
			return 0, err
		}
	}
	t, err := sumServerTicks(p, all)
	return ticksToDuration(t), err
}
