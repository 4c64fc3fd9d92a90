package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// workloadTarget names the goal rows of bench-results.json.
const workloadTarget = "target"

// targetResult is one goal of the snapshot cache, as the report prints it in its goals
// section and bench-results.json holds it. A goal is reported, never checked: a goal not
// reached says how far the store is from it, and only the end-of-run checks decide PASS or
// FAIL.
type targetResult struct {
	Workload string `json:"workload"` // workloadTarget
	Target   string `json:"target"`   // the goal: "aio+cache ×1 +2ms: ≥ 1.30× aio"
	// Met is nil when the run did not measure what the goal needs (a variant, a round trip
	// or a concurrency level it did not run).
	Met *bool `json:"met"`
	// Gap is how far the measured figure furthest from the goal falls short of it, in the
	// goal's own unit (a ratio of events/s, or server commands per event): 0 when the goal
	// is reached, nil when it was not measured.
	Gap      *float64 `json:"gap"`
	Measured string   `json:"measured"` // the figures, by round trip; or why there are none

	gapText string // the gap as the report words it: "0.17× short", "0.30 over at 2ms"
}

// Goals of the snapshot cache (aio+cache).
const (
	targetPathCommands = 1.0  // commands on the critical path per event at 1 handler, exactly
	targetOverAIO      = 1.3  // aio+cache over aio, 1 handler, +2ms
	targetOverRaw      = 0.95 // aio+cache over raw, 1 handler at +2ms, 64 handlers at every round trip
	targetCommandsAt64 = 0.3  // server commands per event at 64 handlers, every client
	targetOverSeedPort = 3.0  // aio+cache over seed-port, 1 handler, +10ms
)

// goalFigure is one measured figure of a goal and its distance from the goal.
type goalFigure struct {
	text     string  // the figure as printed: "1.13×", "0.60"
	gap      float64 // how far it falls short of the goal, in the goal's unit; 0 when it meets it
	measured bool    // false when the figure could not be measured: text says why
}

// issueTargets judges the snapshot cache's goals on results.
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
		t.Measured = fmt.Sprintf("%.2f× = %.1f/%.1f events/s", x, c.EventsPerS, o.EventsPerS)
		t.judge(max(0, want-x), "%.2f× short")
		return t
	}
	// atEvery judges each aio+cache row at conc with figure; the goal is reached when every
	// row reaches it, and its gap is the largest of the rows'. gapFormat words a gap.
	atEvery := func(name string, conc int, gapFormat string, figure func(r runResult) goalFigure) targetResult {
		t := targetResult{Workload: workloadTarget, Target: name}
		rows := every(conc)
		if len(rows) == 0 {
			t.Measured = fmt.Sprintf("needs %s at concurrency %d", variantCache, conc)
			return t
		}
		measured := true
		worst, worstAt := 0.0, ""
		var figures []string
		for _, r := range rows {
			f := figure(r)
			figures = append(figures, f.text+" at "+rttLabel(r.RTTms))
			measured = measured && f.measured
			if f.measured && f.gap > worst {
				worst, worstAt = f.gap, rttLabel(r.RTTms)
			}
		}
		t.Measured = strings.Join(figures, ", ")
		if !measured {
			return t
		}
		if len(rows) > 1 {
			gapFormat += " at " + worstAt
		}
		t.judge(worst, gapFormat)
		return t
	}
	return []targetResult{
		atEvery(fmt.Sprintf("%s ×1: exactly %g server command per event on the critical path (seq-block reservations aside)",
			variantCache, targetPathCommands), 1, "%.3f off", func(r runResult) goalFigure {
			steady := r.PathCommands - r.Counts["seq_blocks"]
			perEvent := float64(steady) / float64(max(r.Events, 1))
			f := goalFigure{text: fmt.Sprintf("%d/%d = %.3f", steady, r.Events, perEvent), measured: r.Events > 0}
			if float64(steady) != targetPathCommands*float64(r.Events) {
				f.gap = math.Abs(perEvent - targetPathCommands)
			}
			return f
		}),
		over(fmt.Sprintf("%s ×1 +2ms: ≥ %.2f× aio", variantCache, targetOverAIO), variantAIO, 1, 2*time.Millisecond, targetOverAIO),
		over(fmt.Sprintf("%s ×1 +2ms: ≥ %.2f× raw", variantCache, targetOverRaw), variantRaw, 1, 2*time.Millisecond, targetOverRaw),
		atEvery(fmt.Sprintf("%s ×64: ≤ %.2f server commands per event, every client", variantCache, targetCommandsAt64), 64,
			"%.2f over", func(r runResult) goalFigure {
				f := goalFigure{text: fmt.Sprintf("%.2f", r.CommandsPerEvent), measured: r.Events > 0}
				if float64(r.Commands) > targetCommandsAt64*float64(r.Events)+1e-9 {
					f.gap = float64(r.Commands)/float64(max(r.Events, 1)) - targetCommandsAt64
				}
				return f
			}),
		atEvery(fmt.Sprintf("%s ×64: ≥ %.2f× raw", variantCache, targetOverRaw), 64, "%.2f× short", func(r runResult) goalFigure {
			raw := find(variantRaw, 64, r.RTTms)
			if raw == nil || raw.EventsPerS <= 0 {
				return goalFigure{text: "no raw run"}
			}
			x := r.EventsPerS / raw.EventsPerS
			return goalFigure{text: fmt.Sprintf("%.2f×", x), gap: max(0, targetOverRaw-x), measured: true}
		}),
		over(fmt.Sprintf("%s ×1 +10ms: ≥ %.2f× seed-port", variantCache, targetOverSeedPort), variantSeedPort, 1,
			10*time.Millisecond, targetOverSeedPort),
	}
}

// minGap is the smallest gap a goal not reached is given, so that a miss too small to show
// in the figures still reads as one.
const minGap = 0.001

// judge sets t's verdict from gap, its distance from the goal (0: reached), worded with
// gapFormat when it is not reached.
func (t *targetResult) judge(gap float64, gapFormat string) {
	met := gap <= 0
	gap = max(round(gap, 3), 0)
	if !met {
		gap = max(gap, minGap)
	}
	t.Met, t.Gap = &met, &gap
	if !met {
		t.gapText = fmt.Sprintf(gapFormat, gap)
	}
}

// goalsHeading opens the goals section of the report.
const goalsHeading = "goals of the snapshot cache (reported only: they do not affect PASS/FAIL)"

// writeTargets prints the goals section: one line per goal, with its measured figures and
// either "reached", the gap to the goal, or why it was not measured. It prints nothing when
// no aio+cache row ran.
func writeTargets(out io.Writer, targets []targetResult) {
	measured := false
	for _, t := range targets {
		measured = measured || t.Met != nil
	}
	if !measured {
		return
	}
	fmt.Fprintf(out, "\n%s\n", goalsHeading)
	for _, t := range targets {
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
