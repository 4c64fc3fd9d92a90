package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
)

// workloadJournal names the operation journal's rows in bench-results.json.
const workloadJournal = "journal"

// journalResult is one (design, concurrency) row of the journal report and of
// bench-results.json.
type journalResult struct {
	Workload    string  `json:"workload"`
	Design      string  `json:"variant"`
	Concurrency int     `json:"concurrency"`
	RTTms       float64 `json:"rtt_ms"`
	Server      string  `json:"server"`
	Invocations int     `json:"invocations"`
	// WeakDurability says the journal was opened with AcceptWeakDurability: the server is a
	// single node.
	WeakDurability bool `json:"weak_durability"`

	InvocationsPerS   float64 `json:"invocations_per_s"`
	P50ms             float64 `json:"p50_ms"`
	P99ms             float64 `json:"p99_ms"`
	CmdsPerInvocation float64 `json:"commands_per_invocation"`
	// CommandsPerName is the commands per invocation by command name.
	CommandsPerName map[string]float64 `json:"commands_per_invocation_by_name"`
	WallS           float64            `json:"wall_s"`
	ChecksPassed    bool               `json:"checks_passed"`
	FailedChecks    []string           `json:"failed_checks,omitempty"`
}

// newJournalResult fills row with the figures and verdicts of m.
func newJournalResult(row journalResult, m journalMeasured) journalResult {
	n := float64(max(m.invocations, 1))
	row.Concurrency, row.Invocations, row.WeakDurability = m.concurrency, m.invocations, m.weak
	row.InvocationsPerS = round(n/max(m.wall.Seconds(), 1e-9), 1)
	row.WallS = round(m.wall.Seconds(), 3)
	if len(m.latency) > 0 {
		row.P50ms = round(millis(percentile(m.latency, 50)), 3)
		row.P99ms = round(millis(percentile(m.latency, 99)), 3)
	}
	row.CommandsPerName = map[string]float64{}
	for name, v := range m.commands {
		row.CommandsPerName[name] = round(float64(v)/n, 3)
	}
	row.CmdsPerInvocation = round(float64(m.commands.total())/n, 3)
	row.ChecksPassed = true
	for _, c := range m.checks {
		if !c.ok {
			row.ChecksPassed = false
			row.FailedChecks = append(row.FailedChecks, fmt.Sprintf("%s: %s", c.name, c.detail))
		}
	}
	return row
}

// failed reports whether a check of the row failed.
func (r journalResult) failed() bool { return !r.ChecksPassed }

// writeJournalTable prints the journal rows, one per design and concurrency, the durability
// the journal was opened with, and the commands per invocation by name.
func writeJournalTable(out io.Writer, invocations int, rows []journalResult) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\noperation journal: %d invocations per run, each claimed, checkpointed, prepared, dispatched "+
		"and reconciled succeeded by one caller\n", invocations)
	if slices.ContainsFunc(rows, func(r journalResult) bool { return r.WeakDurability }) {
		fmt.Fprintln(out, journalWeakNote)
	} else {
		fmt.Fprintln(out, journalStrongNote)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "design\tcallers\tinvocations/s\tp50 ms\tp99 ms\tcmds/invocation\tchecks\t")
	for _, r := range rows {
		checks := "ok"
		if r.failed() {
			checks = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t%.2f\t%s\t\n", r.Design, r.Concurrency, r.InvocationsPerS,
			latencyMs(r.P50ms), latencyMs(r.P99ms), r.CmdsPerInvocation, checks)
	}
	tw.Flush()

	byName := make([]commandRow, 0, len(rows))
	for _, r := range rows {
		byName = append(byName, commandRow{labels: []string{r.Design, strconv.Itoa(r.Concurrency)}, byName: r.CommandsPerName})
	}
	writeCommandTable(out, "server commands per journal invocation, by command", []string{"design", "callers"}, byName)
}

// journalFailures returns the failed checks of the rows, one line each, as under the table.
func journalFailures(rows []journalResult) []string {
	var failed []string
	for _, r := range rows {
		for _, f := range r.FailedChecks {
			failed = append(failed, fmt.Sprintf("  %s ×%d: %s", r.Design, r.Concurrency, f))
		}
	}
	return failed
}
