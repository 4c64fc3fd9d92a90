package main

import (
	"bytes"
	"cmp"
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
	Workload    string  `json:"workload"` // workloadEngine
	Variant     string  `json:"variant"`
	Concurrency int     `json:"concurrency"`
	RTTms       float64 `json:"rtt_ms"`
	EventsPerS  float64 `json:"events_per_s"`
	P50ms       float64 `json:"p50_ms"`
	P99ms       float64 `json:"p99_ms"`
	// DeliveryP50ms and DeliveryP99ms are the delivery latency: from the return of the commit
	// that emitted an event to the start of its first handling (the relay's wake-up, scan and
	// lane), over the events emitted in the window. Raw hands events over in memory.
	DeliveryP50ms    float64 `json:"delivery_p50_ms"`
	DeliveryP99ms    float64 `json:"delivery_p99_ms"`
	CommandsPerEvent float64 `json:"commands_per_event"`
	// PathCommandsPerEvent counts only the commands of the events' critical path: the
	// handlers' loads and commits, not the relay's scans and acks nor the sweeper's.
	PathCommandsPerEvent float64 `json:"path_commands_per_event"`
	Server               string  `json:"server"`

	// Events/s over seed-port's, aio's and raw's at this round trip and concurrency.
	RatioSeedPort *float64 `json:"ratio_to_seed_port,omitempty"`
	RatioAIO      *float64 `json:"ratio_to_aio,omitempty"`
	RatioRaw      *float64 `json:"ratio_to_raw,omitempty"`

	Rounds           int       `json:"rounds"`
	EventsPerSRounds []float64 `json:"events_per_s_rounds,omitempty"` // each round's, when more than one

	Events         int64 `json:"events"`
	DuplicatesSeen int64 `json:"duplicates_skipped"`
	Executions     int   `json:"executions"`
	// Budget is the events of each of its runs (see levelEvents).
	Budget          int                `json:"budget"`
	WallS           float64            `json:"wall_s"`
	SetupS          float64            `json:"setup_s"`
	MaxMs           float64            `json:"max_ms"`
	Commands        int64              `json:"commands"`
	CommandsPerName map[string]float64 `json:"commands_per_event_by_name"`
	PathCommands    int64              `json:"path_commands"`
	PathPerName     map[string]float64 `json:"path_commands_per_event_by_name"`
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
		RTTms:           float64(spec.rtt) / float64(time.Millisecond),
		Server:          server,
		Executions:      cfg.executions,
		Budget:          cfg.events,
		Rounds:          len(runs),
		CommandsPerName: map[string]float64{},
		PathPerName:     map[string]float64{},
		Counts:          map[string]int64{},
		HeapStartMiB:    round(mebibytes(runs[0].window.heapStart), 2),
		ChecksPassed:    true,
	}
	var latencies, delivery []time.Duration
	calls := map[string][]time.Duration{}
	var rates []float64
	var wall, setup time.Duration
	cmds, path := commandCounts{}, commandCounts{}
	for _, m := range runs {
		w := m.window
		r.Events += w.processed
		r.DuplicatesSeen += w.skipped
		wall += w.wall
		setup += w.setup
		rates = append(rates, float64(w.processed)/max(w.wall.Seconds(), 1e-9))
		latencies = append(latencies, w.latencies...)
		delivery = append(delivery, w.delivery...)
		cmds = cmds.plus(w.commands)
		path = path.plus(w.path)
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
	r.PathCommands = path.total()
	r.PathCommandsPerEvent = round(float64(r.PathCommands)/events, 3)
	for name, n := range path {
		r.PathPerName[name] = round(float64(n)/events, 3)
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
	if len(delivery) > 0 {
		s := sortedDurations(delivery)
		r.DeliveryP50ms = round(millis(percentile(s, 50)), 3)
		r.DeliveryP99ms = round(millis(percentile(s, 99)), 3)
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

// fillRatios sets each result's ratios to the seed-port's, aio's and raw's events/s at the
// same round trip and concurrency, where those were measured.
func fillRatios(results []runResult) {
	by := func(variant string, r *runResult) *runResult {
		for i := range results {
			s := &results[i]
			if s.Variant == variant && s.Concurrency == r.Concurrency && s.RTTms == r.RTTms {
				return s
			}
		}
		return nil
	}
	ratioTo := func(variant string, r *runResult) *float64 {
		s := by(variant, r)
		if s == nil || s.EventsPerS <= 0 {
			return nil
		}
		v := round(r.EventsPerS/s.EventsPerS, 3)
		return &v
	}
	for i := range results {
		r := &results[i]
		r.RatioSeedPort = ratioTo(variantSeedPort, r)
		r.RatioAIO = ratioTo(variantAIO, r)
		r.RatioRaw = ratioTo(variantRaw, r)
	}
}

// sortResults orders results by round trip, then concurrency, then variant in allVariants
// order.
func sortResults(results []runResult) []runResult {
	s := slices.Clone(results)
	slices.SortStableFunc(s, func(a, b runResult) int {
		if a.RTTms != b.RTTms {
			return cmp.Compare(a.RTTms, b.RTTms)
		}
		if a.Concurrency != b.Concurrency {
			return a.Concurrency - b.Concurrency
		}
		return slices.Index(allVariants, a.Variant) - slices.Index(allVariants, b.Variant)
	})
	return s
}

// rttLabel is how the report names a round trip added by the proxy: "0ms", "2ms".
func rttLabel(ms float64) string { return strconv.FormatFloat(ms, 'f', -1, 64) + "ms" }

// rttsLabel names the round trips of cfg for the report's header.
func rttsLabel(cfg config) string {
	var s []string
	proxied := false
	for _, d := range cfg.rtts {
		s = append(s, rttLabel(float64(d.Milliseconds())))
		proxied = proxied || d > 0
	}
	out := strings.Join(s, ", ")
	if len(cfg.rtts) == 1 && !proxied {
		return "none"
	}
	if proxied {
		out += " (in-process proxy)"
	}
	return out
}

// writeTable prints the results table, the commands per event by name, the idempotency rows
// (idem, none when that workload did not run), the journal rows (jrnl, likewise), the goals
// of the snapshot cache, and the end-of-run checks with each failed one. The verdict that
// ends the report is writeVerdict's.
func writeTable(out io.Writer, cfg config, server string, results []runResult, idem []idemResult, jrnl []journalResult, delivery *deliveryReport) {
	fmt.Fprintf(out, "execstore bench: %s\n", server)
	budget := fmt.Sprintf("%d events per run", cfg.events)
	if levels := levelBudgets(cfg, results); levels != "" {
		budget = "events per run " + levels
	}
	if slices.Contains(cfg.variants, variantMemory) && cfg.memoryEvents != cfg.events {
		budget += fmt.Sprintf(" (memory: %d)", cfg.memoryEvents)
	}
	fmt.Fprintf(out, "%d executions, %s, %d round(s), redeliver %g, seed %d, added round trip %s\n",
		cfg.executions, budget, cfg.rounds, cfg.redeliver, cfg.seed, rttsLabel(cfg))
	if len(cfg.rtts) > 1 && (len(idem) > 0 || len(jrnl) > 0) {
		fmt.Fprintf(out, "the idempotency and journal workloads run at the first round trip, %s\n",
			rttLabel(float64(cfg.rtts[0].Milliseconds())))
	}
	fmt.Fprintln(out)
	if len(results) == 0 {
		fmt.Fprintln(out, "no run completed")
		return
	}
	results = sortResults(results)

	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', tabwriter.AlignRight)
	const columns = "variant\trtt\tconcurrency\tevents/s\tp50 ms\tp99 ms\tdelivery p50\tdelivery p99\tcmds/event\tpath cmds/event\t×seed-port\t×aio\t×raw\theap MiB\tchecks\t"
	fmt.Fprintln(tw, columns)
	for i, r := range results {
		if i > 0 && (r.RTTms != results[i-1].RTTms || r.Concurrency != results[i-1].Concurrency) {
			// An empty row between groups, its cells empty so that the columns stay aligned.
			fmt.Fprintln(tw, strings.Repeat("\t", strings.Count(columns, "\t")))
		}
		checks := "ok"
		if !r.ChecksPassed {
			checks = "FAIL"
		}
		cmds, path := "-", "-" // no server
		if usesServer(r.Variant) {
			cmds, path = fmt.Sprintf("%.2f", r.CommandsPerEvent), fmt.Sprintf("%.2f", r.PathCommandsPerEvent)
		}
		deliveryP50, deliveryP99 := "-", "-" // raw: handed over in memory
		if r.Variant != variantRaw {
			deliveryP50, deliveryP99 = latencyMs(r.DeliveryP50ms), latencyMs(r.DeliveryP99ms)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f→%.0f\t%s\t\n",
			r.Variant, rttLabel(r.RTTms), r.Concurrency, r.EventsPerS, latencyMs(r.P50ms), latencyMs(r.P99ms),
			deliveryP50, deliveryP99, cmds, path,
			ratio(r.RatioSeedPort), ratio(r.RatioAIO), ratio(r.RatioRaw), r.HeapStartMiB, r.HeapEndMiB, checks)
	}
	tw.Flush()
	writeTrimmed(out, table.String())

	rows := make([]commandRow, 0, len(results))
	for _, r := range results {
		rows = append(rows, commandRow{labels: []string{r.Variant, rttLabel(r.RTTms), strconv.Itoa(r.Concurrency)},
			byName: r.CommandsPerName})
	}
	writeCommandTable(out, "server commands per event, by command", []string{"variant", "rtt", "concurrency"}, rows)

	writeIdemTable(out, cfg.idemKeys, idem)
	writeJournalTable(out, cfg.journalInvocations, jrnl)
	delivery.writeTable(out)

	writeTargets(out, issueTargets(results))
	delivery.writeGoals(out)
	writeChecks(out, append(checkedWorkloads(results, idem, jrnl), delivery.checked()...))
}

// runLabel names a row in lines under the tables: "aio ×8", "aio+cache ×1 +2ms".
func runLabel(r runResult) string {
	l := fmt.Sprintf("%s ×%d", r.Variant, r.Concurrency)
	if r.RTTms > 0 {
		l += " +" + rttLabel(r.RTTms)
	}
	return l
}

// writeTrimmed writes s with the spaces at the end of each line removed.
func writeTrimmed(out io.Writer, s string) {
	for line := range strings.Lines(s) {
		fmt.Fprintln(out, strings.TrimRight(line, " \n"))
	}
}

// writeOutputs writes DIR/bench-results.json (the engine rows, then the snapshot cache's
// target rows when aio+cache ran, then the idempotency rows, then the journal rows, then the
// delivery section's rows, each row naming its workload) and, when a server-backed variant ran, DIR/bench.png, and returns
// their paths.
func writeOutputs(cfg config, server string, results []runResult, idem []idemResult, jrnl []journalResult, delivery *deliveryReport) ([]string, error) {
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return nil, err
	}
	results = sortResults(results)
	rows := make([]any, 0, len(results)+len(idem)+len(jrnl))
	for _, r := range results {
		rows = append(rows, r)
	}
	if slices.ContainsFunc(results, func(r runResult) bool { return r.Variant == variantCache }) {
		for _, t := range issueTargets(results) {
			rows = append(rows, t)
		}
	}
	for _, r := range idem {
		rows = append(rows, r)
	}
	for _, r := range jrnl {
		rows = append(rows, r)
	}
	rows = append(rows, delivery.jsonRows()...)
	jsonPath := filepath.Join(cfg.out, "bench-results.json")
	if err := writeJSON(jsonPath, rows); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(results, func(r runResult) bool { return usesServer(r.Variant) }) {
		return []string{jsonPath}, nil // the chart has only server-backed variants
	}
	pngPath := filepath.Join(cfg.out, "bench.png")
	if err := writeChart(pngPath, server, results); err != nil {
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

// levelBudgets names each level's budget ("100 at ×1, 814 at ×8, 900 at ×64", per round trip
// when they differ) when the runs were sized by the server and some level's differs from
// -events; "" otherwise.
func levelBudgets(cfg config, results []runResult) string {
	if !cfg.sizeByServer {
		return ""
	}
	var parts []string
	seen := map[string]bool{}
	differs := false
	for _, r := range results {
		if r.Variant == variantMemory {
			continue
		}
		part := fmt.Sprintf("%d at ×%d", r.Budget, r.Concurrency)
		if len(cfg.rtts) > 1 {
			part += " " + rttLabel(r.RTTms)
		}
		if !seen[part] {
			seen[part] = true
			parts = append(parts, part)
		}
		differs = differs || r.Budget != cfg.events
	}
	if !differs {
		return ""
	}
	return strings.Join(parts, ", ") + " (sized by the server's speed, see -events)"
}
