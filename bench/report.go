package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// runResult is one (variant, concurrency) row of the report and of bench-results.json.
type runResult struct {
	Workload         string  `json:"workload"` // workloadEngine
	Variant          string  `json:"variant"`
	Concurrency      int     `json:"concurrency"`
	RTTms            float64 `json:"rtt_ms"`
	EventsPerS       float64 `json:"events_per_s"`
	P50ms            float64 `json:"p50_ms"`
	P99ms            float64 `json:"p99_ms"`
	CommandsPerEvent float64 `json:"commands_per_event"`
	Server           string  `json:"server"`

	RatioSeedPort *float64 `json:"ratio_to_seed_port,omitempty"` // events/s over seed-port's at this concurrency
	RatioRaw      *float64 `json:"ratio_to_raw,omitempty"`       // events/s over raw's at this concurrency

	Rounds           int       `json:"rounds"`
	EventsPerSRounds []float64 `json:"events_per_s_rounds,omitempty"` // each round's, when more than one

	Events          int64              `json:"events"`
	DuplicatesSeen  int64              `json:"duplicates_skipped"`
	Executions      int                `json:"executions"`
	WallS           float64            `json:"wall_s"`
	SetupS          float64            `json:"setup_s"`
	MaxMs           float64            `json:"max_ms"`
	Commands        int64              `json:"commands"`
	CommandsPerName map[string]float64 `json:"commands_per_event_by_name"`
	Counts          map[string]int64   `json:"counts"`
	CallMs          map[string]callMs  `json:"call_ms,omitempty"` // store calls as the workload saw them
	HeapStartMiB    float64            `json:"heap_start_mib"`
	HeapEndMiB      float64            `json:"heap_end_mib"`
	ChecksPassed    bool               `json:"checks_passed"`
	FailedChecks    []string           `json:"failed_checks,omitempty"`
}

// newRunResult summarizes the rounds of one (variant, concurrency): events/s is the median
// of the rounds' rates, the latency percentiles are over every round's events, commands per
// event over all of them.
func newRunResult(cfg config, server string, runs []measured) runResult {
	spec := runs[0].spec
	r := runResult{
		Workload:        workloadEngine,
		Variant:         spec.variant,
		Concurrency:     spec.concurrency,
		RTTms:           float64(cfg.rtt) / float64(time.Millisecond),
		Server:          server,
		Executions:      cfg.executions,
		Rounds:          len(runs),
		CommandsPerName: map[string]float64{},
		Counts:          map[string]int64{},
		HeapStartMiB:    round(mebibytes(runs[0].window.heapStart), 2),
		ChecksPassed:    true,
	}
	var latencies []time.Duration
	calls := map[string][]time.Duration{}
	var rates []float64
	var wall, setup time.Duration
	cmds := commandCounts{}
	for _, m := range runs {
		w := m.window
		r.Events += w.processed
		r.DuplicatesSeen += w.skipped
		wall += w.wall
		setup += w.setup
		rates = append(rates, float64(w.processed)/max(w.wall.Seconds(), 1e-9))
		latencies = append(latencies, w.latencies...)
		for k, v := range w.commands {
			cmds[k] += v
		}
		for k, v := range w.counts {
			r.Counts[k] += v
		}
		for k, v := range w.callTimes {
			calls[k] = append(calls[k], v...)
		}
		r.HeapEndMiB = max(r.HeapEndMiB, round(mebibytes(w.heapEnd), 2))
		for _, c := range m.checks {
			if !c.ok {
				r.ChecksPassed = false
				r.FailedChecks = append(r.FailedChecks, fmt.Sprintf("%s: %s", c.name, c.detail))
			}
		}
	}
	slices.Sort(rates)
	r.EventsPerS = round(median(rates), 2)
	if len(rates) > 1 {
		for _, x := range rates {
			r.EventsPerSRounds = append(r.EventsPerSRounds, round(x, 2))
		}
	}
	events := float64(max(r.Events, 1))
	r.Commands = cmds.total()
	r.CommandsPerEvent = round(float64(r.Commands)/events, 3)
	for name, n := range cmds {
		r.CommandsPerName[name] = round(float64(n)/events, 3)
	}
	r.WallS = round(wall.Seconds(), 3)
	r.SetupS = round(setup.Seconds(), 3)
	for k, d := range calls {
		if len(d) == 0 {
			continue
		}
		if r.CallMs == nil {
			r.CallMs = make(map[string]callMs)
		}
		s := sortedDurations(d)
		r.CallMs[k] = callMs{Calls: len(s), P50: round(millis(percentile(s, 50)), 3), P99: round(millis(percentile(s, 99)), 3)}
	}
	if len(latencies) > 0 {
		s := sortedDurations(latencies)
		r.P50ms = round(millis(percentile(s, 50)), 3)
		r.P99ms = round(millis(percentile(s, 99)), 3)
		r.MaxMs = round(millis(s[len(s)-1]), 3)
	}
	return r
}

// callMs is the latency of one kind of store call.
type callMs struct {
	Calls int     `json:"calls"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
}

// median returns the median of the sorted, non-empty s.
func median(s []float64) float64 {
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// fillRatios sets each result's ratios to the seed-port's and the raw run's events/s at the
// same concurrency, where those were measured.
func fillRatios(results []runResult) {
	by := func(variant string, conc int) *runResult {
		for i := range results {
			if results[i].Variant == variant && results[i].Concurrency == conc {
				return &results[i]
			}
		}
		return nil
	}
	for i := range results {
		r := &results[i]
		if s := by(variantSeedPort, r.Concurrency); s != nil && s.EventsPerS > 0 {
			v := round(r.EventsPerS/s.EventsPerS, 3)
			r.RatioSeedPort = &v
		}
		if s := by(variantRaw, r.Concurrency); s != nil && s.EventsPerS > 0 {
			v := round(r.EventsPerS/s.EventsPerS, 3)
			r.RatioRaw = &v
		}
	}
}

// sortResults orders results by concurrency, then variant in allVariants order.
func sortResults(results []runResult) []runResult {
	s := slices.Clone(results)
	slices.SortStableFunc(s, func(a, b runResult) int {
		if a.Concurrency != b.Concurrency {
			return a.Concurrency - b.Concurrency
		}
		return slices.Index(allVariants, a.Variant) - slices.Index(allVariants, b.Variant)
	})
	return s
}

// writeTable prints the results table, the commands per event by name, the idempotency rows
// (idem, none when that workload did not run), the journal rows (jrnl, likewise), and the
// failed checks.
func writeTable(out io.Writer, cfg config, server string, results []runResult, idem []idemResult, jrnl []journalResult) {
	rtt := "none"
	if cfg.rtt > 0 {
		rtt = cfg.rtt.String() + " (in-process proxy)"
	}
	fmt.Fprintf(out, "execstore bench: %s\n", server)
	fmt.Fprintf(out, "%d executions, %d events per run, %d round(s), redeliver %g, seed %d, added round trip %s\n\n",
		cfg.executions, cfg.events, cfg.rounds, cfg.redeliver, cfg.seed, rtt)
	if len(results) == 0 {
		fmt.Fprintln(out, "no run completed")
		return
	}
	results = sortResults(results)

	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "variant\tconcurrency\tevents/s\tp50 ms\tp99 ms\tcmds/event\t×seed-port\t×raw\theap MiB\tchecks\t")
	for _, r := range results {
		checks := "ok"
		if !r.ChecksPassed {
			checks = "FAIL"
		}
		cmds := "-" // no server
		if usesServer(r.Variant) {
			cmds = fmt.Sprintf("%.2f", r.CommandsPerEvent)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%.0f→%.0f\t%s\t\n",
			r.Variant, r.Concurrency, r.EventsPerS, latencyMs(r.P50ms), latencyMs(r.P99ms), cmds,
			ratio(r.RatioSeedPort), ratio(r.RatioRaw), r.HeapStartMiB, r.HeapEndMiB, checks)
	}
	tw.Flush()

	rows := make([]commandRow, 0, len(results))
	for _, r := range results {
		rows = append(rows, commandRow{labels: []string{r.Variant, strconv.Itoa(r.Concurrency)}, byName: r.CommandsPerName})
	}
	writeCommandTable(out, "server commands per event, by command", []string{"variant", "concurrency"}, rows)

	writeIdemTable(out, cfg.idemKeys, idem)
	writeJournalTable(out, cfg.journalInvocations, jrnl)

	var failed []string
	for _, r := range results {
		for _, f := range r.FailedChecks {
			failed = append(failed, fmt.Sprintf("  %s ×%d: %s", r.Variant, r.Concurrency, f))
		}
	}
	failed = append(failed, idemFailures(idem)...)
	failed = append(failed, journalFailures(jrnl)...)
	fmt.Fprintln(out)
	if len(failed) > 0 {
		fmt.Fprintln(out, "FAIL: failed checks")
		for _, f := range failed {
			fmt.Fprintln(out, f)
		}
	} else {
		fmt.Fprintln(out, "PASS: every end-of-run check passed")
	}
}

// writeOutputs writes DIR/bench-results.json (the engine rows, then the idempotency rows, then
// the journal rows, each row naming its workload) and, when a server-backed variant ran, DIR/bench.png, and
// returns their paths.
func writeOutputs(cfg config, server string, results []runResult, idem []idemResult, jrnl []journalResult) ([]string, error) {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return nil, err
	}
	results = sortResults(results)
	rows := make([]any, 0, len(results)+len(idem)+len(jrnl))
	for _, r := range results {
		rows = append(rows, r)
	}
	for _, r := range idem {
		rows = append(rows, r)
	}
	for _, r := range jrnl {
		rows = append(rows, r)
	}
	jsonPath := filepath.Join(cfg.out, "bench-results.json")
	if err := writeJSON(jsonPath, rows); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(results, func(r runResult) bool { return usesServer(r.Variant) }) {
		return []string{jsonPath}, nil // the chart has only server-backed variants
	}
	pngPath := filepath.Join(cfg.out, "bench.png")
	if err := writeChart(pngPath, cfg, server, results); err != nil {
		return []string{jsonPath}, fmt.Errorf("writing %s: %w", pngPath, err)
	}
	return []string{jsonPath, pngPath}, nil
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// latencyMs formats a latency in milliseconds: to a tenth, or to a microsecond below 1 ms
// (the memory variant's).
func latencyMs(ms float64) string {
	if ms < 1 {
		return fmt.Sprintf("%.3f", ms)
	}
	return fmt.Sprintf("%.1f", ms)
}

func ratio(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *r)
}

// percentile returns the nearest-rank p-th percentile of the sorted, non-empty s.
func percentile(s []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mebibytes(b uint64) float64 { return float64(b) / (1 << 20) }

func round(x float64, places int) float64 {
	p := math.Pow(10, float64(places))
	return math.Round(x*p) / p
}

// commandRow is one row of a table of server commands per operation by command name: the
// row's labels, then the commands by name.
type commandRow struct {
	labels []string
	byName map[string]float64
}

// writeCommandTable prints, under title, one column per command name any row has, after the
// header's label columns; "-" where a row sent none of that name. It prints nothing when no
// row has a command (only memory ran).
func writeCommandTable(out io.Writer, title string, header []string, rows []commandRow) {
	names := map[string]bool{}
	for _, r := range rows {
		for n := range r.byName {
			names[n] = true
		}
	}
	cols := slices.Sorted(maps.Keys(names))
	if len(cols) == 0 {
		return
	}
	fmt.Fprintf(out, "\n%s\n", title)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "%s\t%s\t\n", strings.Join(header, "\t"), strings.Join(cols, "\t"))
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t", strings.Join(r.labels, "\t"))
		for _, c := range cols {
			if v, ok := r.byName[c]; ok {
				fmt.Fprintf(tw, "%.2f\t", v)
			} else {
				fmt.Fprint(tw, "-\t")
			}
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}
