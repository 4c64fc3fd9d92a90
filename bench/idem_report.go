package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"text/tabwriter"
)

// Workloads, as bench-results.json names them in each row.
const (
	workloadEngine = "engine"
	workloadIdem   = "idempotency"
)

// idemResult is one (design, concurrency) row of the idempotency report and of
// bench-results.json.
type idemResult struct {
	Workload    string  `json:"workload"`
	Design      string  `json:"variant"`
	Concurrency int     `json:"concurrency"`
	RTTms       float64 `json:"rtt_ms"`
	Server      string  `json:"server"`
	Keys        int     `json:"keys"`
	// NotRun says why the design was not run on this server; the row has no figures then.
	NotRun string `json:"not_run,omitempty"`

	ClaimsPerS      float64 `json:"claims_per_s,omitempty"`
	CompletesPerS   float64 `json:"completes_per_s,omitempty"`
	ReplaysPerS     float64 `json:"replays_per_s,omitempty"`
	CmdsPerClaim    float64 `json:"commands_per_claim,omitempty"`
	CmdsPerComplete float64 `json:"commands_per_complete,omitempty"`
	CmdsPerReplay   float64 `json:"commands_per_replay,omitempty"`
	// CommandsPerOp is each phase's commands per operation by command name.
	CommandsPerOp map[string]map[string]float64 `json:"commands_per_op_by_name,omitempty"`
	WallS         map[string]float64            `json:"wall_s,omitempty"` // by phase
	// ChecksPassed is nil for a design not run: nothing was checked.
	ChecksPassed *bool    `json:"checks_passed,omitempty"`
	FailedChecks []string `json:"failed_checks,omitempty"`
}

// newIdemResult fills row with the figures and verdicts of m.
func newIdemResult(row idemResult, m idemMeasured) idemResult {
	n := float64(max(m.keys, 1))
	row.CommandsPerOp = map[string]map[string]float64{}
	row.WallS = map[string]float64{}
	passed := true
	rate := func(phase string) float64 {
		return round(n/max(m.phases[phase].wall.Seconds(), 1e-9), 1)
	}
	perOp := func(phase string) float64 {
		cmds := m.phases[phase].commands
		byName := map[string]float64{}
		for name, v := range cmds {
			byName[name] = round(float64(v)/n, 3)
		}
		row.CommandsPerOp[phase] = byName
		row.WallS[phase] = round(m.phases[phase].wall.Seconds(), 3)
		return round(float64(cmds.total())/n, 3)
	}
	row.ClaimsPerS, row.CmdsPerClaim = rate("claim"), perOp("claim")
	row.CompletesPerS, row.CmdsPerComplete = rate("complete"), perOp("complete")
	row.ReplaysPerS, row.CmdsPerReplay = rate("replay"), perOp("replay")
	for _, c := range m.checks {
		if !c.ok {
			passed = false
			row.FailedChecks = append(row.FailedChecks, fmt.Sprintf("%s: %s", c.name, c.detail))
		}
	}
	row.ChecksPassed = &passed
	return row
}

// failed reports whether the row was run and a check failed.
func (r idemResult) failed() bool { return r.ChecksPassed != nil && !*r.ChecksPassed }

// writeIdemTable prints the idempotency rows: one per design and concurrency, a line for a
// design not run, and the commands per operation by name.
func writeIdemTable(out io.Writer, keys int, rows []idemResult) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(out, "\nidempotency keys: %d keys per run, each claimed once, completed once, then claimed again (replay)\n", keys)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "design\tconcurrency\tclaims/s\tcompletes/s\treplays/s\tcmds/claim\tcmds/complete\tcmds/replay\tchecks\t")
	var notRun []string
	for _, r := range rows {
		if r.NotRun != "" {
			if line := fmt.Sprintf("seed-port (%s): %s", r.Design, r.NotRun); !slices.Contains(notRun, line) {
				notRun = append(notRun, line)
			}
			continue
		}
		checks := "ok"
		if r.failed() {
			checks = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.2f\t%.2f\t%.2f\t%s\t\n", idemLabel(r.Design), r.Concurrency,
			r.ClaimsPerS, r.CompletesPerS, r.ReplaysPerS, r.CmdsPerClaim, r.CmdsPerComplete, r.CmdsPerReplay, checks)
	}
	tw.Flush()
	for _, l := range notRun {
		fmt.Fprintln(out, l)
	}

	var byName []commandRow
	for _, r := range rows {
		if r.NotRun != "" {
			continue
		}
		for _, phase := range idemPhases {
			byName = append(byName, commandRow{labels: []string{idemLabel(r.Design), strconv.Itoa(r.Concurrency), phase},
				byName: r.CommandsPerOp[phase]})
		}
	}
	writeCommandTable(out, "server commands per idempotency operation, by command",
		[]string{"design", "concurrency", "operation"}, byName)
}

// idemLabel is how the table names a design: the seed's as its port.
func idemLabel(design string) string {
	if design == idemDesignSeed {
		return "seed-port (idemkit)"
	}
	return design
}

// idemFailures returns the failed checks of the rows, one line each, as under the table.
func idemFailures(rows []idemResult) []string {
	var failed []string
	for _, r := range rows {
		for _, f := range r.FailedChecks {
			failed = append(failed, fmt.Sprintf("  %s ×%d: %s", idemLabel(r.Design), r.Concurrency, f))
		}
	}
	return failed
}
