package main

import (
	"fmt"
	"io"
	"strings"
)

// checksHeading opens the end-of-run checks section of the report.
const checksHeading = "end-of-run checks (they decide PASS/FAIL)"

// The report's last line when the run passed.
const passLine = "PASS: every end-of-run check passed"

// checkedRows is one workload's rows as the checks section counts them.
type checkedRows struct {
	workload string   // "engine", "idempotency keys", "operation journal"
	rows     int      // rows whose checks ran
	failed   int      // rows with a failed check
	failures []string // the failed checks, one line each: "aio ×8: outbox empty at the end: …"
}

// checkedWorkloads counts the checked rows of each workload that has any, and their failed
// checks.
func checkedWorkloads(results []runResult, idem []idemResult, jrnl []journalResult) []checkedRows {
	var out []checkedRows
	if len(results) > 0 {
		c := checkedRows{workload: "engine", rows: len(results)}
		for _, r := range sortResults(results) {
			if !r.ChecksPassed {
				c.failed++
			}
			for _, f := range r.FailedChecks {
				c.failures = append(c.failures, fmt.Sprintf("%s: %s", runLabel(r), f))
			}
		}
		out = append(out, c)
	}
	c := checkedRows{workload: "idempotency keys"}
	for _, r := range idem {
		if r.ChecksPassed == nil {
			continue // not run: nothing was checked
		}
		c.rows++
		if r.failed() {
			c.failed++
		}
	}
	c.failures = trimmed(idemFailures(idem))
	if c.rows > 0 {
		out = append(out, c)
	}
	c = checkedRows{workload: "operation journal", rows: len(jrnl)}
	for _, r := range jrnl {
		if r.failed() {
			c.failed++
		}
	}
	c.failures = trimmed(journalFailures(jrnl))
	if c.rows > 0 {
		out = append(out, c)
	}
	return out
}

// trimmed returns lines without their leading spaces.
func trimmed(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = strings.TrimLeft(l, " ")
	}
	return out
}

// writeChecks prints the end-of-run checks section: for each workload, how many of its rows
// passed every check, then each failed check.
func writeChecks(out io.Writer, workloads []checkedRows) {
	if len(workloads) == 0 {
		return
	}
	fmt.Fprintf(out, "\n%s\n", checksHeading)
	for _, w := range workloads {
		fmt.Fprintf(out, "  check   %s: %d of %d rows passed every check\n", w.workload, w.rows-w.failed, w.rows)
	}
	for _, w := range workloads {
		for _, f := range w.failures {
			fmt.Fprintf(out, "  FAILED  %s\n", f)
		}
	}
}

// writeVerdict prints the report's last line and returns the exit status. The run passes,
// status 0, when at least one row was checked, no check failed, every run completed
// (stopped is nil) and the output files were written (outputs is nil). Otherwise the line
// starts with "FAIL:" and says why.
func writeVerdict(out io.Writer, workloads []checkedRows, stopped, outputs error) int {
	var why []string
	rows, failed := 0, 0
	for _, w := range workloads {
		rows += w.rows
		failed += max(len(w.failures), w.failed) // a failed row names its checks, one line each
	}
	if failed > 0 {
		why = append(why, fmt.Sprintf("%d end-of-run %s failed (listed above)", failed, plural(failed, "check", "checks")))
	}
	if stopped != nil {
		why = append(why, fmt.Sprintf("the benchmark stopped before its last run: %v", stopped))
	} else if rows == 0 {
		why = append(why, "no run completed, so nothing was checked")
	}
	if outputs != nil {
		why = append(why, fmt.Sprintf("writing the output files: %v", outputs))
	}
	if len(why) > 0 {
		fmt.Fprintf(out, "FAIL: %s\n", strings.Join(why, "; "))
		return 1
	}
	fmt.Fprintln(out, passLine)
	return 0
}

// plural returns one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
