package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// envServerPIDs lists, comma-separated, the server's processes whose CPU the delivery section
// reads (for DocumentDB: the postmaster and FerretDB). Unset, the CPU is not measured.
const envServerPIDs = "EXECSTORE_BENCH_SERVER_PIDS"

// clockTicksPerSecond is USER_HZ, the unit of /proc/PID/stat's times: 100 on every Linux
// architecture Go runs on, whatever the kernel's own HZ.
const clockTicksPerSecond = 100

// serverProcesses are the server's processes whose CPU the delivery section reads: each one
// listed and every live child of it (a PostgreSQL backend is a child of the postmaster).
// Empty: not measured.
type serverProcesses []int

// parseServerPIDs parses envServerPIDs's value: positive pids, comma-separated; "" is none.
func parseServerPIDs(s string) (serverProcesses, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out serverProcesses
	for f := range strings.SplitSeq(s, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid < 1 {
			return nil, fmt.Errorf("%s: %q is not a pid", envServerPIDs, f)
		}
		out = append(out, pid)
	}
	return out, nil
}

// procStat is what a /proc/PID/stat line says of the CPU its process used.
type procStat struct {
	ppid int
	// ticks are utime, stime, cutime and cstime (fields 14 to 17): the process's own time
	// and that of its children it reaped, which a child's own four carry into on its exit, so
	// that a child that ends between two readings is counted once.
	ticks int64
}

// parseProcStat parses a /proc/PID/stat line. The command name, field 2, is in parentheses
// and may hold spaces and parentheses of its own: the fields are counted after the last ")".
func parseProcStat(line string) (procStat, error) {
	i := strings.LastIndexByte(line, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("a /proc stat line with no command name: %q", line)
	}
	f := strings.Fields(line[i+1:]) // f[0] is field 3, the state
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("a /proc stat line with %d fields after the command name", len(f))
	}
	var st procStat
	var err error
	if st.ppid, err = strconv.Atoi(f[1]); err != nil {
		return procStat{}, fmt.Errorf("a /proc stat line's ppid: %w", err)
	}
	for _, v := range f[11:15] {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return procStat{}, fmt.Errorf("a /proc stat line's times: %w", err)
		}
		st.ticks += n
	}
	return st, nil
}

// sumServerTicks returns the ticks of the processes listed and of each one's live children,
// given every process's stat by pid.
func sumServerTicks(listed serverProcesses, all map[int]procStat) (int64, error) {
	isListed := map[int]bool{}
	var t int64
	for _, pid := range listed {
		st, ok := all[pid]
		if !ok {
			return 0, fmt.Errorf("server process %d: not running", pid)
		}
		if !isListed[pid] {
			t += st.ticks
		}
		isListed[pid] = true
	}
	for pid, st := range all {
		if isListed[st.ppid] && !isListed[pid] {
			t += st.ticks
		}
	}
	return t, nil
}

// ticksToDuration converts clock ticks to CPU time.
func ticksToDuration(t int64) time.Duration {
	return time.Duration(t) * time.Second / clockTicksPerSecond
}

// serverCPU is the CPU the server's processes used over a span of wall time.
type serverCPU struct {
	cpu, wall time.Duration
}

// measure starts a span of the server's CPU; the func it returns ends it. That returns nil
// when the CPU is not measured: no process listed, not Linux, or /proc could not be read
// (said on standard error).
func (p serverProcesses) measure() func() *serverCPU {
	none := func() *serverCPU { return nil }
	if len(p) == 0 {
		return none
	}
	warn := func(err error) { fmt.Fprintf(os.Stderr, "bench: server CPU not measured: %v\n", err) }
	from, err := p.cpu()
	if err != nil {
		warn(err)
		return none
	}
	start := time.Now()
	return func() *serverCPU {
		to, err := p.cpu()
		if err != nil {
			warn(err)
			return nil
		}
		return &serverCPU{cpu: to - from, wall: time.Since(start)}
	}
}
