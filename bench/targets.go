package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// workloadTarget names the target rows of bench-results.json.
const workloadTarget = "target"

// targetResult is the verdict on one performance target of the snapshot cache, as the report
// prints it under the tables and bench-results.json holds it. A missed target is reported,
// not a failure: only the end-of-run checks decide the exit status.
type targetResult struct {
	Workload string `json:"workload"` // workloadTarget
	Target   string `json:"target"`
	// Met is nil when the run did not measure what the target needs (a variant, a round trip
	// or a concurrency level it did not run).
	Met      *bool  `json:"met"`
	Measured string `json:"measured"` // the figures, by round trip; or why there are none
}

// Targets of the snapshot cache (aio+cache).
const (
	targetPathCommands = 1.0  // commands on the critical path per event at 1 handler, exactly
	targetOverAIO      = 1.3  // aio+cache over aio, 1 handler, +2ms
	targetOverRaw      = 0.95 // aio+cache over raw, 1 handler at +2ms, 64 handlers at every round trip
	targetCommandsAt64 = 0.3  // server commands per event at 64 handlers, every client
	targetOverSeedPort = 3.0  // aio+cache over seed-port, 1 handler, +10ms
)

// issueTargets judges the snapshot cache's targets on results.
func issueTargets(results []runResult) []targetResult {
	find := func(variant string, conc int, rttMs float64) *runResult {
		for i := range results {
			r := &results[i]
			if r.Variant == variant && r.Concurrency == conc && r.RTTms == rttMs {
				return r
			}
		}
		return nil
	}
	// every returns the aio+cache rows at concurrency conc, every round trip, in order.
	every := func(conc int) []runResult {
		var out []runResult
		for _, r := range sortResults(results) {
			if r.Variant == variantCache && r.Concurrency == conc {
				out = append(out, r)
			}
		}
		return out
	}
	// over judges aio+cache against other at conc and rtt: at least want times its events/s.
	over := func(name, other string, conc int, rtt time.Duration, want float64) targetResult {
		ms := float64(rtt.Milliseconds())
		t := targetResult{Workload: workloadTarget, Target: name}
		c, o := find(variantCache, conc, ms), find(other, conc, ms)
		if c == nil || o == nil || o.EventsPerS <= 0 {
			t.Measured = fmt.Sprintf("needs %s and %s at concurrency %d, -rtt %s", variantCache, other, conc, rttLabel(ms))
			return t
		}
		x := c.EventsPerS / o.EventsPerS
		t.Met = verdict(x >= want)
		t.Measured = fmt.Sprintf("%.2f× = %.1f/%.1f events/s", x, c.EventsPerS, o.EventsPerS)
		return t
	}
	// atEvery judges each aio+cache row at conc with judge, which returns the row's figure and
	// whether it meets the target; the target is met when every row does.
	atEvery := func(name string, conc int, judge func(r runResult) (string, bool)) targetResult {
		t := targetResult{Workload: workloadTarget, Target: name}
		rows := every(conc)
		if len(rows) == 0 {
			t.Measured = fmt.Sprintf("needs %s at concurrency %d", variantCache, conc)
			return t
		}
		met := true
		var figures []string
		for _, r := range rows {
			figure, ok := judge(r)
			met = met && ok
			figures = append(figures, figure+" at "+rttLabel(r.RTTms))
		}
		t.Met = verdict(met)
		t.Measured = strings.Join(figures, ", ")
		return t
	}
	return []targetResult{
		atEvery(fmt.Sprintf("%s ×1: exactly %g server command per event on the critical path (seq-block reservations aside)",
			variantCache, targetPathCommands), 1, func(r runResult) (string, bool) {
			steady := r.PathCommands - r.Counts["seq_blocks"]
			return fmt.Sprintf("%d/%d = %.3f", steady, r.Events, float64(steady)/float64(max(r.Events, 1))),
				r.Events > 0 && float64(steady) == targetPathCommands*float64(r.Events)
		}),
		over(fmt.Sprintf("%s ×1 +2ms: at least %g× aio", variantCache, targetOverAIO), variantAIO, 1, 2*time.Millisecond, targetOverAIO),
		over(fmt.Sprintf("%s ×1 +2ms: at least %g× raw", variantCache, targetOverRaw), variantRaw, 1, 2*time.Millisecond, targetOverRaw),
		atEvery(fmt.Sprintf("%s ×64: at most %g server commands per event, every client", variantCache, targetCommandsAt64), 64,
			func(r runResult) (string, bool) {
				return fmt.Sprintf("%.2f", r.CommandsPerEvent), r.Events > 0 && float64(r.Commands) <= targetCommandsAt64*float64(r.Events)+1e-9
			}),
		atEvery(fmt.Sprintf("%s ×64: at least %g× raw", variantCache, targetOverRaw), 64, func(r runResult) (string, bool) {
			raw := find(variantRaw, 64, r.RTTms)
			if raw == nil || raw.EventsPerS <= 0 {
				return "no raw run", false
			}
			x := r.EventsPerS / raw.EventsPerS
			return fmt.Sprintf("%.2f×", x), x >= targetOverRaw
		}),
		over(fmt.Sprintf("%s ×1 +10ms: at least %g× seed-port", variantCache, targetOverSeedPort), variantSeedPort, 1,
			10*time.Millisecond, targetOverSeedPort),
	}
}

func verdict(ok bool) *bool { return &ok }

// writeTargets prints the targets' verdicts, one line each; nothing when no aio+cache row
// ran.
func writeTargets(out io.Writer, targets []targetResult) {
	measured := false
	for _, t := range targets {
		measured = measured || t.Met != nil
	}
	if !measured {
		return
	}
	fmt.Fprintln(out, "\ntargets of the snapshot cache (reported; they do not decide the exit status)")
	for _, t := range targets {
		switch {
		case t.Met == nil:
			fmt.Fprintf(out, "  target %s: not measured (%s)\n", t.Target, t.Measured)
		case *t.Met:
			fmt.Fprintf(out, "  target %s: met (measured %s)\n", t.Target, t.Measured)
		default:
			fmt.Fprintf(out, "  target %s: NOT met (measured %s)\n", t.Target, t.Measured)
		}
	}
}
