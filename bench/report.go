package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/execstore/execstore/aio"
)

// runInfo describes where a run ran.
type runInfo struct {
	server   string
	profile  string
	database string
	dropped  bool
	embedded bool
}

// opOrder is the order the store's operations are listed in.
var opOrder = []string{
	"load_for_event", "commit", "pending_outbox", "ack_outbox", "due_timers", "delete_timer",
	"load", "is_processed", "list", "pending_spawns", "ack_spawn", "append_trace", "read_trace",
}

// writeReport prints the measurements.
func writeReport(out io.Writer, cfg config, info runInfo, r results) {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	p := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", label, fmt.Sprintf(format, args...))
	}
	events := float64(max(r.events, 1))

	fmt.Fprintln(tw, "execstore bench: engine workload through the async store")
	fmt.Fprintln(tw)
	p("server", "%s", info.server)
	p("profile", "%s", info.profile)
	db := info.database
	if info.dropped {
		db += " (fresh, dropped at exit)"
	}
	p("database", "%s", db)
	p("workload", "%d executions, %d events, %d handlers, seed %d, redeliver %g",
		cfg.executions, cfg.events, cfg.concurrency, cfg.seed, cfg.redeliver)
	p("seeding", "%d executions created in %s", cfg.executions, seconds(r.seedTime))
	fmt.Fprintln(tw)
	p("events processed", "%d (%d start, %d emitted by handlers)", r.events, r.startEvts, r.events-r.startEvts)
	p("wall time", "%s", seconds(r.wall))
	p("throughput", "%.1f events/s", events/max(r.wall.Seconds(), 1e-9))
	p("commit", "%s", latencies(r.commitLats))
	p("LoadForEvent", "%s", latencies(r.loads))
	cmds := r.after.ServerCommands - r.before.ServerCommands
	p("server commands", "%.2f per event (%d in all)", float64(cmds)/events, cmds)
	p("conflicts", "%d", r.conflicts)
	p("duplicates skipped", "%d (%d deliveries repeated by the relay)", r.duplicates, r.redelivered)
	p("timers", "%d armed, %d cancels, %d fired, %d stale deletes",
		r.timersArmed, r.timersCancelled, r.timersFired, r.staleDeletes)
	p("trace steps", "%d", r.traced)
	heapNote := ""
	if info.embedded {
		heapNote = " (whole process, embedded server included)"
	}
	p("heap in use", "%s at start, %s at end%s", mib(r.heapStart), mib(r.heapEnd), heapNote)
	fmt.Fprintln(tw)

	fmt.Fprintln(tw, "store operations\tcalls\tper event\terrors")
	for _, name := range opNames(r.after.Ops) {
		b, a := r.before.Ops[name], r.after.Ops[name]
		calls, errs := a.Calls-b.Calls, a.Errors-b.Errors
		if calls == 0 {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%d\t%.2f\t%d\n", name, calls, float64(calls)/events, errs)
	}
	fmt.Fprintln(tw)
}

// opNames returns the operation names of ops, those of opOrder first, in its order, and any
// others after them, sorted.
func opNames(ops map[string]aio.OpStats) []string {
	names := slices.Clone(opOrder)
	var rest []string
	for name := range ops {
		if !slices.Contains(opOrder, name) {
			rest = append(rest, name)
		}
	}
	slices.Sort(rest)
	return append(names, rest...)
}

// writeChecks prints the checks' verdicts and the overall one, and reports whether all passed.
func writeChecks(out io.Writer, checks []check) bool {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "checks")
	passed := true
	for _, c := range checks {
		verdict := "ok"
		if !c.ok {
			verdict, passed = "FAIL", false
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", verdict, c.name, c.detail)
	}
	tw.Flush()
	if passed {
		fmt.Fprintln(out, "PASS")
	} else {
		fmt.Fprintln(out, "FAIL: the run broke the store's contract (see the checks above)")
	}
	return passed
}

// latencies formats the p50 and p99 of d.
func latencies(d []time.Duration) string {
	if len(d) == 0 {
		return "no calls"
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("p50 %s  p99 %s  max %s  (%d calls)",
		millis(percentile(s, 50)), millis(percentile(s, 99)), millis(s[len(s)-1]), len(s))
}

// percentile returns the nearest-rank p-th percentile of the sorted, non-empty s.
func percentile(s []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func millis(d time.Duration) string {
	return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
