package main

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// workloadDeliveryChain is the workload name of the chain rows in bench-results.json.
const workloadDeliveryChain = "delivery-chain"

// chainReport is the chain workload of the delivery section: its runs by 1, 2 and 4 relay
// processes. A nil report is a workload not run.
type chainReport struct {
	chains, hops int
	server       string
	runs         []chainRun
}

// chainResult is one row of the chain workload in bench-results.json. Latencies are by
// nearest rank, in milliseconds to the microsecond.
type chainResult struct {
	Workload  string `json:"workload"` // workloadDeliveryChain
	Processes int    `json:"processes"`
	Placed    bool   `json:"placed"` // each chain's pair named into one partition (execstore.PlaceWith)
	// Faults: a relay process joined as the seeds were committed and the one that began
	// the latest hop was killed with SIGKILL once a third were handled; the hops' latencies
	// include the take-over of its partitions, when its leases ran out.
	Faults bool `json:"faults"`
	Chains int  `json:"chains"`
	Hops   int  `json:"hops"` // per chain, after its seed
	// HopsMeasured are the hops whose latency the logs give: from the return of the commit
	// that emitted the hop (logged by the emitting process) to the start of its first
	// handling (logged by the receiving process). AcrossProcesses of them had the two in
	// different processes; AcrossP50Ms and WithinP50Ms are the median of those and of the
	// others, left out when there were none.
	HopsMeasured    int      `json:"hops_measured"`
	HopP50Ms        float64  `json:"hop_p50_ms"`
	HopP90Ms        float64  `json:"hop_p90_ms"`
	HopP99Ms        float64  `json:"hop_p99_ms"`
	HopMaxMs        float64  `json:"hop_max_ms"`
	AcrossProcesses int      `json:"across_processes"`
	AcrossP50Ms     *float64 `json:"across_p50_ms,omitempty"`
	WithinP50Ms     *float64 `json:"within_p50_ms,omitempty"`
	// SeedP50Ms is the seeds' latency, from the bench's commit to the first handler's start:
	// not a hop, and not in the hops' figures.
	SeedP50Ms float64 `json:"seed_p50_ms"`
	// ChainMeanS and ChainMaxS are over the chains: from the return of the commit that
	// emitted hop 1 to the end of the last hop's handler.
	ChainMeanS float64 `json:"chain_mean_s"`
	ChainMaxS  float64 `json:"chain_max_s"`
	// Events are the outbox entries handed to a handler (the seeds and the hops), and
	// HandlerCalls the calls, of which Duplicates found their event processed and
	// FailedCalls failed (a lease lost cancels its handlers' context).
	Events       int `json:"events"`
	HandlerCalls int `json:"handler_calls"`
	Duplicates   int `json:"duplicates"`
	FailedCalls  int `json:"failed_calls"`
	// StoreCommandsByName and LeaseCommandsByName are the commands the relay processes'
	// store and lease clients sent from the seeds' commits to every hop acked (the
	// handlers' loads and commits, the scans, acks and lease calls), summed over the
	// processes; CommandsPerEvent is their total over Events, left out when a process
	// reported none.
	StoreCommandsByName map[string]int64 `json:"store_commands_by_name,omitempty"`
	LeaseCommandsByName map[string]int64 `json:"lease_commands_by_name,omitempty"`
	CommandsPerEvent    *float64         `json:"commands_per_event,omitempty"`
	// StoreCommandsByOperation are StoreCommandsByName by the operation each served
	// (aio.OperationOf: "other" for none), and HandlerCommandsPerEvent those the handlers
	// waited for (their loads and commits) over Events: the critical path.
	StoreCommandsByOperation map[string]int64 `json:"store_commands_by_operation,omitempty"`
	HandlerCommandsPerEvent  *float64         `json:"handler_commands_per_event,omitempty"`
	// RelayHandedOver, RelayTargeted and RelayWoken are the relays' Stats of those names,
	// summed over the processes' last: the entries taken with no read (handed over in a
	// process, or carried by a mark), the targeted reads, and the executions marks made
	// them read.
	RelayHandedOver int64    `json:"relay_handed_over"`
	RelayTargeted   int64    `json:"relay_targeted"`
	RelayWoken      int64    `json:"relay_woken"`
	PollIntervalMs  float64  `json:"poll_interval_ms"` // the relays' PollInterval
	WallS           float64  `json:"wall_s"`
	Server          string   `json:"server"`
	ChecksPassed    bool     `json:"checks_passed"`
	FailedChecks    []string `json:"failed_checks,omitempty"`
}

// rows returns the report's rows, one a run.
func (c *chainReport) rows() []chainResult {
	if c == nil {
		return nil
	}
	ms := func(s []time.Duration, p float64) float64 {
		if len(s) == 0 {
			return 0
		}
		return round(millis(percentile(sortedDurations(s), p)), 3)
	}
	median := func(s []time.Duration) *float64 {
		if len(s) == 0 {
			return nil
		}
		v := ms(s, 50)
		return &v
	}
	var out []chainResult
	for _, r := range c.runs {
		m := r.measure
		row := chainResult{Workload: workloadDeliveryChain, Processes: r.processes, Placed: r.placed, Faults: r.faults, Chains: c.chains, Hops: r.hops,
			HopsMeasured: len(m.hops), HopP50Ms: ms(m.hops, 50), HopP90Ms: ms(m.hops, 90), HopP99Ms: ms(m.hops, 99),
			HopMaxMs: ms(m.hops, 100), AcrossProcesses: len(m.across), AcrossP50Ms: median(m.across),
			WithinP50Ms: median(m.within), SeedP50Ms: ms(m.seeds, 50),
			Events: m.entries, HandlerCalls: m.handlerCalls, Duplicates: m.duplicates, FailedCalls: m.failed,
			StoreCommandsByName: r.cost.storeCommands, LeaseCommandsByName: r.cost.leaseCommands,
			RelayHandedOver: r.relayStats.HandedOver, RelayTargeted: r.relayStats.Targeted, RelayWoken: r.relayStats.Woken,
			PollIntervalMs: millis(deliveryPoll), WallS: round(r.wall.Seconds(), 3), Server: c.server, ChecksPassed: true}
		if len(m.chainTimes) > 0 {
			row.ChainMeanS = round(m.meanChainTime().Seconds(), 3)
			row.ChainMaxS = round(sortedDurations(m.chainTimes)[len(m.chainTimes)-1].Seconds(), 3)
		}
		if r.cost.commandsComplete && m.entries > 0 {
			v := round(float64(r.cost.commands())/float64(m.entries), 2)
			row.CommandsPerEvent = &v
			h := round(float64(r.cost.operations.handlers())/float64(m.entries), 2)
			row.HandlerCommandsPerEvent = &h
			row.StoreCommandsByOperation = r.cost.operations
		}
		for _, ch := range r.checks {
			if !ch.ok {
				row.ChecksPassed = false
				row.FailedChecks = append(row.FailedChecks, fmt.Sprintf("%s: %s", ch.name, ch.detail))
			}
		}
		out = append(out, row)
	}
	return out
}

// writeTable prints the chain workload: per run, the hops' latency, how many crossed
// processes and their median against the others', the chains' mean time, the commands per
// event and the duplicates; then what the columns count.
func (c *chainReport) writeTable(out io.Writer) {
	rows := c.rows()
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\nchains: %d pairs of executions, each passing an event back and forth %d hops after a seed, by relay processes "+
		"(each Lanes %d, PollInterval %v, lease %v)\n", c.chains, c.hops, chainLanes, deliveryPoll, deliveryLease)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "processes\tpairs\thops\thop p50 ms\thop p90 ms\thop p99 ms\tacross processes\tacross p50 ms\twithin p50 ms\t"+
		"chain mean s\tcmds/event\thandler cmds/event\tduplicates\tchecks\t\n")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%.2f\t%s\t%s\t%d\t%s\t\n", processesCell(r),
			map[bool]string{true: "placed", false: "spread"}[r.Placed], r.HopsMeasured,
			latencyMs(r.HopP50Ms), latencyMs(r.HopP90Ms), latencyMs(r.HopP99Ms), r.AcrossProcesses, msCell(r.AcrossP50Ms), msCell(r.WithinP50Ms),
			r.ChainMeanS, perEventCell(r.CommandsPerEvent), perEventCell(r.HandlerCommandsPerEvent), r.Duplicates, checksCell(r.ChecksPassed))
	}
	tw.Flush()
	seeds, failed, anyFailed := "", "", false
	for i, r := range rows {
		if i > 0 {
			seeds += " / "
			failed += " / "
		}
		seeds += latencyMs(r.SeedP50Ms)
		failed += fmt.Sprint(r.FailedCalls)
		anyFailed = anyFailed || r.FailedCalls > 0
	}
	fmt.Fprintf(out, "  hop: from the return of the commit that emitted it (logged by the emitting process) to the start of its handler "+
		"(logged by the receiving one); across processes: the hops whose two differ, which a mark on the store's board wakes the receiving relay for (its next poll when the mark is lost or late), "+
		"where a process's own commits are handed to its relay in memory, at times before the commit's return is logged (below 0); "+
		"chain: from hop 1 emitted to the end of the last hop's handler\n")
	fmt.Fprintf(out, "  seeds (the bench's commits, not hops) to their first handler, p50 ms: %s\n", seeds)
	fmt.Fprintf(out, "  cmds/event: the commands of every relay process's store and lease clients (handlers' loads and commits, scans, acks, "+
		"lease calls) from the seeds to every hop acked, over the %d events delivered, seeds included; duplicates: handler calls "+
		"that found their event processed, each chain's last hop but one delivered again on purpose (its first ack withheld)\n",
		rows[0].Events)
	if slices.ContainsFunc(rows, func(r chainResult) bool { return r.Faults }) {
		fmt.Fprintf(out, "  4+1-1: by 4 relay processes, the chains up to %d times longer (as long as make those without faults last %v); "+
			"a fifth process joins as the seeds are committed, the others hand it partitions mid-chain, and once a third of the hops are "+
			"handled the process with the most chains under way is killed with SIGKILL: its hops wait for the take-over of its partitions when its "+
			"leases run out (%v), the hops' p99 and the chains' time with them; cmds/event is partial, the killed process's commands unknown\n",
			maxFaultHopsFactor, faultChainSpan, deliveryLease)
	}
	if anyFailed {
		fmt.Fprintf(out, "  handler calls that failed (a lost lease cancels its handlers' context), delivered again: %s\n", failed)
	}
}

// checked returns the chain workload's rows as the checks section counts them.
func (c *chainReport) checked() []checkedRows {
	rows := c.rows()
	if len(rows) == 0 {
		return nil
	}
	cr := checkedRows{workload: "delivery chains", rows: len(rows)}
	for _, r := range rows {
		if !r.ChecksPassed {
			cr.failed++
		}
		for _, f := range r.FailedChecks {
			cr.failures = append(cr.failures, fmt.Sprintf("chains ×%s, %s: %s", processesCell(r), map[bool]string{true: "placed", false: "spread"}[r.Placed], f))
		}
	}
	return []checkedRows{cr}
}

// jsonRows returns the rows for bench-results.json.
func (c *chainReport) jsonRows() []any {
	var out []any
	for _, r := range c.rows() {
		out = append(out, r)
	}
	return out
}

// msCell is a latency in milliseconds (latencyMs), or "-" when there was none to measure.
func msCell(v *float64) string {
	if v == nil {
		return "-"
	}
	return latencyMs(*v)
}

// perEventCell is a row's commands per event, or "partial" when a process reported none.
func perEventCell(v *float64) string {
	if v == nil {
		return "partial"
	}
	return fmt.Sprintf("%.2f", *v)
}

// processesCell is a row's relay processes, "4+1-1" for 4 that one joined and one of which
// was killed.
func processesCell(r chainResult) string {
	if r.Faults {
		return fmt.Sprintf("%d+1-1", r.Processes)
	}
	return fmt.Sprint(r.Processes)
}
