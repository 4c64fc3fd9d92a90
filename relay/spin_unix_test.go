//go:build unix

package relay_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
)

// cpuTime is the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	require.NoError(t, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A sweeper whose lanes are full waits for room: a fire time that comes meanwhile neither
// makes it scan again and again nor keeps it busy. Batch 2 and one lane, whose handler
// blocks on the first timer: three due timers and a fourth, read ahead of its fire time, fill
// the sweeper, and the fourth comes due while it is full. Over the 300ms it waits, the process uses far less than 300ms of CPU.
func TestSweeperWaitsForRoom(t *testing.T) {
	store := newMemstore(t)
	em := newEmitter(t, store)
	now := nowFireTime()
	for i, exe := range []string{"a", "b", "x"} {
		em.schedule(exe, "T", now.Add(-time.Duration(3-i)*time.Second))
	}
	em.schedule("c", "T", now.Add(50*time.Millisecond))
	f := newFirings(t)
	unblock := make(chan struct{})
	f.fail = func(tm execstore.DueTimer, _ int) error {
		if tm.ExecutionID == "a" {
			<-unblock
		}
		return nil
	}
	sw := relay.NewSweeper(store, f.handle, relay.Options{Batch: 2, Lanes: 1, PollInterval: time.Hour})
	stop := run(t, sw)
	eventually(t, func() bool { return sw.Stats().InFlight == 4 }, "full")
	cpu := cpuTime(t)
	time.Sleep(300 * time.Millisecond) // c comes due while the sweeper is full
	cpu = cpuTime(t) - cpu
	scans := sw.Stats().Scans
	close(unblock)
	eventually(t, func() bool { return sw.Stats().Acked == 4 }, "every timer fired")
	require.NoError(t, stop())
	assert.LessOrEqual(t, scans, int64(4), "scans while full")
	assert.Less(t, cpu, 150*time.Millisecond, "CPU time while full")
	f.check()
}
