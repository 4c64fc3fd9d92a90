package relay_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// findings records what the checks of TestProcesses report, for testing the checks on logs
// made up to break what they check.
type findings struct{ errors, logs []string }

// errFailNow ends a check that called FailNow; checked recovers it.
var errFailNow = fmt.Errorf("FailNow")

func (f *findings) Errorf(format string, args ...any) {
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
}
func (f *findings) Logf(format string, args ...any) {
	f.logs = append(f.logs, fmt.Sprintf(format, args...))
}
func (f *findings) FailNow() { panic(errFailNow) }

// checked runs check and returns its findings.
func checked(check func(logChecker)) (f *findings) {
	f = &findings{}
	defer func() {
		if r := recover(); r != nil && r != errFailNow {
			panic(r)
		}
	}()
	check(f)
	return f
}

// at is a time 0.1s × tenths after a fixed moment, in Unix nanoseconds.
func at(tenths int) int64 {
	return time.Unix(1e9, 0).Add(time.Duration(tenths) * 100 * time.Millisecond).UnixNano()
}

// The partition check finds a partition held by two processes at once, a killed process's
// partition never taken over, and one taken over later than the bound; it passes holds that
// follow each other.
func TestProcessesPartitionCheck(t *testing.T) {
	killedAt := time.Unix(0, at(10))
	take := func(proc string, p int, t int64) logLine {
		return logLine{Proc: proc, Kind: "partition", Of: "outbox", Partition: p, Held: true, At: t}
	}
	give := func(proc string, p int, t int64) logLine {
		return logLine{Proc: proc, Kind: "partition", Of: "outbox", Partition: p, At: t}
	}
	victimLog := []logLine{take("p1", 3, at(1)), {Kind: "deliver", Start: at(9), End: at(10)}}

	f := checked(func(c logChecker) {
		checkPartitions(c, map[string][]logLine{"p1": victimLog, "p2": {take("p2", 3, at(30)), give("p2", 3, at(40))}}, "p1", killedAt, 64, idleLeases)
	})
	assert.Empty(t, f.errors, "a take-over 2s after the death")
	assert.Len(t, f.logs, 1)

	f = checked(func(c logChecker) {
		checkPartitions(c, map[string][]logLine{"p1": victimLog, "p2": {take("p2", 3, at(5)), give("p2", 3, at(40))}}, "p1", killedAt, 64, idleLeases)
	})
	assert.NotEmpty(t, f.errors, "p2 took partition 3 while p1 held it")

	f = checked(func(c logChecker) {
		checkPartitions(c, map[string][]logLine{"p1": victimLog, "p2": {take("p2", 4, at(30))}}, "p1", killedAt, 64, idleLeases)
	})
	assert.NotEmpty(t, f.errors, "partition 3 was never taken over")

	f = checked(func(c logChecker) {
		checkPartitions(c, map[string][]logLine{"p1": victimLog, "p2": {take("p2", 3, at(350))}}, "p1", killedAt, 64, idleLeases)
	})
	assert.NotEmpty(t, f.errors, "taken over 34s after the death")
}

// The order check finds one source's entries to one target delivered out of commit order in
// a process; entries to different targets, or in different processes, may come in any order.
func TestProcessesOrderCheck(t *testing.T) {
	w := &procWorkload{entries: []committedEntry{{"s", "a", 1}, {"s", "b", 2}, {"s", "a", 3}}}
	deliver := func(seq int64, target string, start int) logLine {
		return logLine{Kind: "deliver", Source: "s", Seq: seq, Target: target, Start: at(start), End: at(start) + 1}
	}
	f := checked(func(c logChecker) {
		checkOrder(c, w, map[string][]logLine{"p1": {deliver(2, "b", 1), deliver(1, "a", 2), deliver(3, "a", 3)},
			"p2": {deliver(3, "a", 1)}})
	})
	assert.Empty(t, f.errors)
	f = checked(func(c logChecker) {
		checkOrder(c, w, map[string][]logLine{"p1": {deliver(3, "a", 1), deliver(1, "a", 2)}})
	})
	assert.NotEmpty(t, f.errors, "s/3 before s/1, both to a")
}

// The ack check finds an item handed out after its ack completed, and lets another process
// do so only when the acking process lost a lease.
func TestProcessesNotAfterAckCheck(t *testing.T) {
	ack := logLine{Kind: "ack", Source: "s", Seq: 1, End: at(5)}
	late := logLine{Kind: "deliver", Source: "s", Seq: 1, Start: at(6), End: at(7)}
	lost := logLine{Kind: "stats", Of: "outbox", LeasesLost: 1, End: at(8)}
	f := checked(func(c logChecker) { checkNotAfterAck(c, map[string][]logLine{"p1": {ack, late}}) })
	assert.NotEmpty(t, f.errors, "the same process")
	f = checked(func(c logChecker) { checkNotAfterAck(c, map[string][]logLine{"p1": {ack}, "p2": {late}}) })
	assert.NotEmpty(t, f.errors, "another process, no lease lost")
	f = checked(func(c logChecker) { checkNotAfterAck(c, map[string][]logLine{"p1": {ack, lost}, "p2": {late}}) })
	assert.Empty(t, f.errors, "another process, after the acker lost a lease")
	assert.Len(t, f.logs, 1)
}
