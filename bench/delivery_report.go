package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// Workload names of the delivery section's rows in bench-results.json.
const (
	workloadDelivery     = "delivery"
	workloadDeliveryGoal = "delivery-target"
)

// Goals of the delivery's scaling: events/s of 2 and 4 relay processes over 1.
const (
	targetTwoProcesses  = 1.8
	targetFourProcesses = 3.0
)

// serverBound is the share of the lanes' ceiling below which a delivery is said to be bound
// by the server rather than by its lanes.
const serverBound = 0.6

// deliveryReport is the delivery section: the backlog delivered by 1, 2 and 4 relay
// processes, and by 2 of which one was killed. A nil report is a section not run.
type deliveryReport struct {
	entries  int
	wait     time.Duration // the handler's wait (-delivery-wait)
	server   string
	runs     []deliveryRun
	takeOver *deliveryRun
	// loaded and loadedTakeOver are runs again while CPU hogs kept every core busy (-load).
	loaded         []deliveryRun
	loadedTakeOver *deliveryRun
	// chain is the chain workload (-chain); nil when not run.
	chain *chainReport
}

// deliveryResult is one row of the delivery section in bench-results.json.
type deliveryResult struct {
	Workload   string  `json:"workload"` // workloadDelivery
	Processes  int     `json:"processes"`
	Entries    int     `json:"entries"`
	Killed     bool    `json:"killed"` // one process was killed with SIGKILL mid-delivery
	EventsPerS float64 `json:"events_per_s"`
	// RatioToOne is EventsPerS over the 1-process row's; nil on that row and the killed one.
	RatioToOne *float64 `json:"ratio_to_one,omitempty"`
	// LanesCeiling is the events/s the processes' lanes allow: processes × Lanes / the
	// handler's wait, HandlerWaitMS.
	LanesCeiling  float64  `json:"lanes_ceiling_per_s"`
	HandlerWaitMS float64  `json:"handler_wait_ms"`
	Limit         string   `json:"limit"`                 // "lanes" or "server"
	TakeOverS     *float64 `json:"take_over_s,omitempty"` // the killed row only
	WallS         float64  `json:"wall_s"`
	// UnderLoad says CPUHogs busy loops, one per core, ran meanwhile; RatioToIdle is then
	// EventsPerS over the idle row's of as many processes.
	UnderLoad   bool     `json:"under_load"`
	CPUHogs     int      `json:"cpu_hogs,omitempty"`
	RatioToIdle *float64 `json:"ratio_to_idle,omitempty"`
	// Deliveries are the handler calls, the redeliveries included; the costs per entry are
	// over Entries, the entries committed, not over these.
	Deliveries int `json:"deliveries"`
	// StoreCommandsByName and LeaseCommandsByName are the commands the relay processes'
	// store and lease clients sent, summed over the processes, in the delivery's window (see
	// ServerCPUWindowS; the polls and lease renewals meanwhile included). CommandsPartial
	// says a process (the killed one) reported none: the counts are the others', and
	// CommandsPerEntry, their total over Entries, is left out. CommandsRatioToOne is
	// CommandsPerEntry over the 1-process row's, on the idle rows but that one.
	StoreCommandsByName map[string]int64 `json:"store_commands_by_name,omitempty"`
	LeaseCommandsByName map[string]int64 `json:"lease_commands_by_name,omitempty"`
	CommandsPartial     bool             `json:"commands_partial,omitempty"`
	CommandsPerEntry    *float64         `json:"commands_per_entry,omitempty"`
	CommandsRatioToOne  *float64         `json:"commands_ratio_to_one,omitempty"`
	// ServerCPUS is the CPU the server's processes (EXECSTORE_BENCH_SERVER_PIDS and their
	// live children) used from the backlog committed to every entry acked, a span of
	// ServerCPUWindowS; ServerCPUMSPerEntry is it over Entries, and ServerCPURatioToOne that
	// over the 1-process row's, on the idle rows but that one. Left out when not measured.
	ServerCPUS          *float64 `json:"server_cpu_s,omitempty"`
	ServerCPUWindowS    *float64 `json:"server_cpu_window_s,omitempty"`
	ServerCPUMSPerEntry *float64 `json:"server_cpu_ms_per_entry,omitempty"`
	ServerCPURatioToOne *float64 `json:"server_cpu_ratio_to_one,omitempty"`
	// Relays are each relay process's Stats of its leases once it stopped.
	Relays       []relayLeases `json:"relay_processes"`
	Server       string        `json:"server"`
	ChecksPassed bool          `json:"checks_passed"`
	FailedChecks []string      `json:"failed_checks,omitempty"`
}

// relayLeases is one relay process's Stats of its leases, in bench-results.json; a killed
// process reported none.
type relayLeases struct {
	Name       string `json:"name"`
	Killed     bool   `json:"killed"`
	LeasesLost int64  `json:"leases_lost"`
	TakeOvers  int64  `json:"take_overs"`
	ReTakes    int64  `json:"re_takes"`
	// Skipped is the items its relay's scans returned while they were in flight
	// (relay.Stats.Skipped), handed out no second time.
	Skipped int64 `json:"skipped"`
}

// lanesCeiling is the events/s n processes' lanes allow with a handler that waits wait.
func lanesCeiling(n int, wait time.Duration) float64 {
	return float64(n*deliveryLanes) / wait.Seconds()
}

// limit says what bound a run with a handler that waits wait: its lanes, or the server (its
// scans, acks and lease calls) when it reached less than serverBound of the lanes' ceiling.
func limit(r deliveryRun, wait time.Duration) string {
	if r.rate < serverBound*lanesCeiling(r.processes, wait) {
		return "server"
	}
	return "lanes"
}

// rows returns the report's rows: the idle runs, the idle take-over, then the runs under
// load and their take-over.
func (d *deliveryReport) rows() []deliveryResult {
	if d == nil {
		return nil
	}
	var one, oneCommands, oneCPU float64
	idle := map[int]float64{}
	ratioOf := func(x, base float64) *float64 {
		if x <= 0 || base <= 0 {
			return nil
		}
		r := round(x/base, 2)
		return &r
	}
	row := func(r deliveryRun, killed bool) deliveryResult {
		out := deliveryResult{Workload: workloadDelivery, Processes: r.processes, Entries: r.entries, Killed: killed,
			EventsPerS: round(r.rate, 1), LanesCeiling: round(lanesCeiling(r.processes, d.wait), 1), Limit: limit(r, d.wait),
			HandlerWaitMS: round(float64(d.wait)/float64(time.Millisecond), 3),
			WallS:         round(r.wall.Seconds(), 3), UnderLoad: r.hogs > 0, CPUHogs: r.hogs, Server: d.server, ChecksPassed: true,
			Deliveries: r.cost.deliveries, CommandsPartial: !r.cost.commandsComplete,
			StoreCommandsByName: r.cost.storeCommands, LeaseCommandsByName: r.cost.leaseCommands}
		var commands, cpu float64 // per entry; 0: not known
		if r.cost.commandsComplete && r.entries > 0 {
			commands = float64(r.cost.commands()) / float64(r.entries)
			v := round(commands, 2)
			out.CommandsPerEntry = &v
		}
		if c := r.cost.server; c != nil && r.entries > 0 {
			cpu = float64(c.cpu) / float64(time.Millisecond) / float64(r.entries)
			s, w, v := round(c.cpu.Seconds(), 3), round(c.wall.Seconds(), 3), round(cpu, 3)
			out.ServerCPUS, out.ServerCPUWindowS, out.ServerCPUMSPerEntry = &s, &w, &v
		}
		if !killed && r.hogs == 0 {
			if r.processes == 1 {
				oneCommands, oneCPU = commands, cpu
			} else {
				out.CommandsRatioToOne, out.ServerCPURatioToOne = ratioOf(commands, oneCommands), ratioOf(cpu, oneCPU)
			}
		}
		switch {
		case killed:
		case r.hogs > 0:
			if base := idle[r.processes]; base > 0 {
				ratio := round(r.rate/base, 2)
				out.RatioToIdle = &ratio
			}
		case r.processes == 1:
			one = r.rate
		case one > 0:
			ratio := round(r.rate/one, 2)
			out.RatioToOne = &ratio
		}
		if !killed && r.hogs == 0 {
			idle[r.processes] = r.rate
		}
		if killed {
			s := round(r.takeOver.Seconds(), 3)
			out.TakeOverS = &s
		}
		for _, p := range r.procs {
			out.Relays = append(out.Relays, relayLeases{Name: p.name, Killed: p.killed, LeasesLost: p.leasesLost,
				TakeOvers: p.takeOvers, ReTakes: p.reTakes, Skipped: p.skipped})
		}
		for _, c := range r.checks {
			if !c.ok {
				out.ChecksPassed = false
				out.FailedChecks = append(out.FailedChecks, fmt.Sprintf("%s: %s", c.name, c.detail))
			}
		}
		return out
	}
	var out []deliveryResult
	for _, r := range d.runs {
		out = append(out, row(r, false))
	}
	if d.takeOver != nil {
		out = append(out, row(*d.takeOver, true))
	}
	for _, r := range d.loaded {
		out = append(out, row(r, false))
	}
	if d.loadedTakeOver != nil {
		out = append(out, row(*d.loadedTakeOver, true))
	}
	return out
}

// leasesCell is a row's relay processes' leases: lost/take-overs/re-takes of each, "killed"
// for a killed one.
func leasesCell(r deliveryResult) string {
	var cells []string
	for _, p := range r.Relays {
		if p.Killed {
			cells = append(cells, p.Name+" killed")
			continue
		}
		cells = append(cells, fmt.Sprintf("%s %d/%d/%d", p.Name, p.LeasesLost, p.TakeOvers, p.ReTakes))
	}
	if len(cells) == 0 {
		return "-"
	}
	return strings.Join(cells, " ")
}

// goals judges the delivery's scaling goals: 2 and 4 processes over 1.
func (d *deliveryReport) goals() []targetResult {
	if d == nil || len(d.runs)+len(d.loaded) == 0 && d.takeOver == nil && d.loadedTakeOver == nil {
		return nil
	}
	ratios := map[int]*float64{}
	for _, r := range d.rows() {
		if !r.Killed && !r.UnderLoad {
			ratios[r.Processes] = r.RatioToOne
		}
	}
	var out []targetResult
	for _, g := range []struct {
		processes int
		goal      float64
	}{{2, targetTwoProcesses}, {4, targetFourProcesses}} {
		t := targetResult{Workload: workloadDeliveryGoal,
			Target: fmt.Sprintf("delivery by %d relay processes: ≥ %.2f× 1 process", g.processes, g.goal)}
		r := ratios[g.processes]
		if r == nil {
			t.Measured = "not run"
			out = append(out, t)
			continue
		}
		t.Measured = fmt.Sprintf("%.2f×", *r)
		met, gap := *r >= g.goal, max(g.goal-*r, 0)
		t.Met, t.Gap = &met, &gap
		if !met {
			t.gapText = fmt.Sprintf("%.2f× short", gap)
		}
		out = append(out, t)
	}
	var runs []deliveryRun
	runs = append(runs, d.runs...)
	runs = append(runs, d.loaded...)
	for _, r := range []*deliveryRun{d.takeOver, d.loadedTakeOver} {
		if r != nil {
			runs = append(runs, *r)
		}
	}
	if len(runs) > 0 {
		t := targetResult{Workload: workloadDeliveryGoal, Target: "no lease lost by a live relay process"}
		kept := true
		var details []string
		for _, r := range runs {
			if c := leasesKept(r.procs); !c.ok {
				kept = false
				details = append(details, fmt.Sprintf("%d processes%s: %s", r.processes, map[bool]string{true: " under load", false: ""}[r.hogs > 0], c.detail))
			}
		}
		t.Met = &kept
		gap := 0.0
		t.Gap = &gap
		t.Measured = "none lost"
		if !kept {
			t.Measured = strings.Join(details, "; ")
			t.gapText = "not met"
		}
		out = append(out, t)
	}
	return out
}

// writeTable prints the delivery section: the backlog's table, then the chains'.
func (d *deliveryReport) writeTable(out io.Writer) {
	if d == nil {
		return
	}
	d.writeBacklogTable(out)
	d.chain.writeTable(out)
}

// writeBacklogTable prints the backlog's delivery: events/s by relay processes, the lanes'
// ceiling, what bound each run and each process's leases, then the take-over; then the same
// under load.
func (d *deliveryReport) writeBacklogTable(out io.Writer) {
	rows := d.rows()
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\ndelivery: %d outbox entries committed across %d executions, then delivered by relay processes "+
		"(each Lanes %d, a %v handler, lease %v)\n", d.entries, min(d.entries, deliveryExecutions), deliveryLanes, d.wait, deliveryLease)
	for _, loaded := range []bool{false, true} {
		var these []deliveryResult
		for _, r := range rows {
			if r.UnderLoad == loaded {
				these = append(these, r)
			}
		}
		if len(these) == 0 {
			continue
		}
		if loaded {
			fmt.Fprintf(out, "under load: the same while %d CPU hogs (busy loops, one per core) ran\n", these[0].CPUHogs)
		}
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		ratioHead := "×1 process"
		if loaded {
			ratioHead = "×idle"
		}
		fmt.Fprintf(tw, "processes\tevents/s\t%s\tlanes' ceiling/s\tbound by\twall s\tcmds/entry\tcmds ×1\tserver ms/entry\tserver ×1\tserver cores\t"+
			"checks\t  leases lost/take-overs/re-takes\n", ratioHead)
		for _, r := range these {
			if r.Killed {
				continue
			}
			ratio := "-"
			if r.RatioToOne != nil {
				ratio = fmt.Sprintf("%.2f×", *r.RatioToOne)
			}
			if r.RatioToIdle != nil {
				ratio = fmt.Sprintf("%.2f×", *r.RatioToIdle)
			}
			fmt.Fprintf(tw, "%d\t%.1f\t%s\t%.0f\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t  %s\n", r.Processes, r.EventsPerS, ratio, r.LanesCeiling,
				r.Limit, r.WallS, commandsCell(r), ratioCell(r.CommandsRatioToOne), serverCPUCell(r), ratioCell(r.ServerCPURatioToOne),
				serverCoresCell(r), checksCell(r.ChecksPassed), leasesCell(r))
		}
		tw.Flush()
		writeCostNotes(out, these)
		writeSkipped(out, these)
		for _, r := range these {
			if r.Limit == "server" && !r.Killed {
				fmt.Fprintf(out, "  %d %s below %.0f%% of the lanes' ceiling: the server's scans, acks and lease calls bound the delivery\n",
					r.Processes, plural(r.Processes, "process is", "processes are"), serverBound*100)
			}
		}
		for _, r := range these {
			if !r.Killed {
				continue
			}
			took := "its share was not delivered again by the other process"
			if r.TakeOverS != nil && *r.TakeOverS > 0 {
				took = fmt.Sprintf("its share delivered again %.2f s after its death", *r.TakeOverS)
			}
			fmt.Fprintf(out, "  take-over: one of %d processes killed with SIGKILL mid-delivery; %s "+
				"(bound: LeaseDuration×5/4 = %v after its last renewal); leases %s; commands per entry not given "+
				"(the killed process reported none); server ms/entry %s; checks %s\n",
				r.Processes, took, deliveryLease*5/4, leasesCell(r), serverCPUCell(r), checksCell(r.ChecksPassed))
		}
	}
}

// writeGoals prints the delivery's goals, reported as the snapshot cache's are.
func (d *deliveryReport) writeGoals(out io.Writer) {
	goals := d.goals()
	if len(goals) == 0 {
		return
	}
	fmt.Fprintln(out, "\ngoals of the delivery's scaling (reported only: they do not affect PASS/FAIL)")
	for _, t := range goals {
		switch {
		case t.Met == nil:
			fmt.Fprintf(out, "  goal  %s: not measured (%s)\n", t.Target, t.Measured)
		case *t.Met:
			fmt.Fprintf(out, "  goal  %s: %s (reached)\n", t.Target, t.Measured)
		default:
			fmt.Fprintf(out, "  goal  %s: %s (%s)\n", t.Target, t.Measured, t.gapText)
		}
	}
}

// checked returns the delivery section's rows as the checks section counts them: the
// backlog's, then the chains'.
func (d *deliveryReport) checked() []checkedRows {
	if d == nil {
		return nil
	}
	return append(d.checkedBacklog(), d.chain.checked()...)
}

// checkedBacklog returns the backlog's rows as the checks section counts them.
func (d *deliveryReport) checkedBacklog() []checkedRows {
	rows := d.rows()
	if len(rows) == 0 {
		return nil
	}
	c := checkedRows{workload: "delivery", rows: len(rows)}
	for _, r := range rows {
		if !r.ChecksPassed {
			c.failed++
		}
		label := fmt.Sprintf("delivery ×%d", r.Processes)
		if r.Killed {
			label += " (one killed)"
		}
		if r.UnderLoad {
			label += " under load"
		}
		for _, f := range r.FailedChecks {
			c.failures = append(c.failures, fmt.Sprintf("%s: %s", label, f))
		}
	}
	return []checkedRows{c}
}

// jsonRows returns the rows and the goals for bench-results.json, then the chains' rows.
func (d *deliveryReport) jsonRows() []any {
	if d == nil {
		return nil
	}
	var out []any
	for _, r := range d.rows() {
		out = append(out, r)
	}
	for _, g := range d.goals() {
		out = append(out, g)
	}
	return append(out, d.chain.jsonRows()...)
}

func checksCell(ok bool) string {
	if ok {
		return "ok"
	}
	return "FAIL"
}

// writeCostNotes says what the cost columns of rows count.
func writeCostNotes(out io.Writer, rows []deliveryResult) {
	var calls []string
	measured := false
	for _, r := range rows {
		if !r.Killed {
			calls = append(calls, fmt.Sprintf("%d", r.Deliveries))
			measured = measured || r.ServerCPUMSPerEntry != nil
		}
	}
	if len(calls) == 0 {
		return
	}
	fmt.Fprintf(out, "  cmds/entry: the commands of every relay process's store and lease clients from the backlog committed to every entry acked "+
		"(the polls and lease renewals meanwhile included; counted every %v), over the %d entries committed; handler calls, "+
		"the redeliveries included: %s\n", commandsEvery, rows[0].Entries, strings.Join(calls, " / "))
	if measured {
		fmt.Fprintf(out, "  server ms/entry: the CPU of the server's processes (%s and their live children, from /proc) "+
			"from the backlog committed to every entry acked, over the entries; server cores: that CPU over that span\n", envServerPIDs)
	} else {
		fmt.Fprintf(out, "  server ms/entry: not measured (%s names the server's processes, on Linux)\n", envServerPIDs)
	}
}

// commandsCell is a row's commands per entry, or "partial" when a process reported none.
func commandsCell(r deliveryResult) string {
	if r.CommandsPerEntry == nil {
		return "partial"
	}
	return fmt.Sprintf("%.1f", *r.CommandsPerEntry)
}

// serverCPUCell is a row's server ms of CPU per entry, or "not measured".
func serverCPUCell(r deliveryResult) string {
	if r.ServerCPUMSPerEntry == nil {
		return "not measured"
	}
	return fmt.Sprintf("%.2f", *r.ServerCPUMSPerEntry)
}

// serverCoresCell is the cores a row's server used on average over its delivery, or "-".
func serverCoresCell(r deliveryResult) string {
	if r.ServerCPUS == nil || r.ServerCPUWindowS == nil || *r.ServerCPUWindowS <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", *r.ServerCPUS / *r.ServerCPUWindowS)
}

// ratioCell is a ratio to another row, or "-".
func ratioCell(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f×", *r)
}

// writeSkipped prints, for each run of rows but the take-over, the items each relay's scans
// returned while they were in flight (relay.Stats.Skipped): read again for nothing.
func writeSkipped(out io.Writer, rows []deliveryResult) {
	var cells []string
	for _, r := range rows {
		if r.Killed {
			continue
		}
		cell := fmt.Sprintf("%d %s:", r.Processes, plural(r.Processes, "process", "processes"))
		for _, p := range r.Relays {
			cell += fmt.Sprintf(" %s %d", p.Name, p.Skipped)
		}
		cells = append(cells, cell)
	}
	if len(cells) > 0 {
		fmt.Fprintf(out, "  items the scans returned while in flight (relay Stats.Skipped, by process): %s\n", strings.Join(cells, "; "))
	}
}
