package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/execstore/execstore/relay"
)

// soakReport is what a soak measured.
type soakReport struct {
	server      string
	cfg         config
	checkpoints []soakCheckpoint

	wall               time.Duration
	events             int64
	commands           commandCounts
	relay, sweeper     relay.Stats
	duplicates         int64
	conflicts          int64
	staleLoads         int64
	retentionErrors    int64
	lastRetentionError string
}

// soakFile is bench-soak.json.
type soakFile struct {
	Server                string             `json:"server"`
	Events                int64              `json:"events"`
	SimulatedDays         float64            `json:"simulated_days"`
	Live                  int                `json:"live"`
	RetentionH            map[string]float64 `json:"retention_h"`
	RetentionIntervalS    float64            `json:"retention_interval_s"`
	SlackS                float64            `json:"slack_s"` // -soak-slack: see soakCheckpoint.Recent
	Seed                  uint64             `json:"seed"`
	WallS                 float64            `json:"wall_s"`
	EventsPerS            float64            `json:"events_per_s"`
	CommandsPerEvent      float64            `json:"commands_per_event"`
	CommandsByName        map[string]int64   `json:"commands_by_name"`
	Retained              int64              `json:"retained_by_relay"`
	RetentionErrors       int64              `json:"retention_errors"`
	DuplicatesSkipped     int64              `json:"duplicates_skipped"`
	Conflicts             int64              `json:"conflicts"`
	StaleLoads            int64              `json:"stale_loads"`
	Checkpoints           []soakCheckpoint   `json:"checkpoints"`
	Pass                  bool               `json:"pass"`
	BoundFailures         []string           `json:"bound_failures,omitempty"`
	LastRetentionErrorMsg string             `json:"last_retention_error,omitempty"`
}

// failures names every checkpoint whose documents exceed the bound.
func (r *soakReport) failures() []string {
	var out []string
	for _, cp := range r.checkpoints {
		if !cp.BoundMet {
			out = append(out, fmt.Sprintf("at %d events (simulated day %.1f): %d documents in the executions collection, above live %d + within retention %d + recent %d = %d",
				cp.Events, cp.SimulatedDay, cp.Documents, cp.Live, cp.WithinRetention, cp.Recent, cp.Bound)+
				fmt.Sprintf("; finished documents %d, of them with an outbox entry pending %d, with a timer or its hint %d, with dead items %d",
					cp.Held["finished"], cp.Held["outbox_pending"], cp.Held["timer_or_hint"], cp.Held["dead_items"]))
		}
	}
	return out
}

func (r *soakReport) eventsPerS() float64 {
	if r.wall <= 0 {
		return 0
	}
	return round(float64(r.events)/r.wall.Seconds(), 1)
}

// write prints the report, writes bench-soak.json and returns the exit status: 1 when a
// checkpoint's bound failed or the file could not be written.
func (r *soakReport) write(cfg config) (int, error) {
	r.print(os.Stdout)
	fails := r.failures()
	status := 0
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return 1, err
	}
	path := filepath.Join(cfg.out, "bench-soak.json")
	if err := writeJSON(path, r.file()); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		status = 1
	} else {
		fmt.Fprintf(os.Stdout, "wrote %s\n", path)
	}
	if len(fails) > 0 {
		for _, f := range fails {
			fmt.Fprintln(os.Stdout, "bound not met", f)
		}
		fmt.Fprintln(os.Stdout, "FAIL: the executions collection outgrew its bound")
		return 1, nil
	}
	fmt.Fprintln(os.Stdout, "PASS")
	return status, nil
}

func (r *soakReport) file() soakFile {
	total := r.commands.total()
	f := soakFile{
		Server: r.server, Events: r.events, SimulatedDays: r.cfg.soakDays, Live: r.cfg.soakLive,
		RetentionH: map[string]float64{"done": r.cfg.soakRetention.Done.Hours(), "failed": r.cfg.soakRetention.Failed.Hours(),
			"cancelled": r.cfg.soakRetention.Cancelled.Hours()},
		RetentionIntervalS: soakRetentionInterval.Seconds(), SlackS: r.cfg.soakSlack.Seconds(),
		Seed: r.cfg.seed, WallS: round(r.wall.Seconds(), 1), EventsPerS: r.eventsPerS(),
		CommandsByName: r.commands, Retained: r.relay.Retained, RetentionErrors: r.retentionErrors,
		DuplicatesSkipped: r.duplicates, Conflicts: r.conflicts, StaleLoads: r.staleLoads, Checkpoints: r.checkpoints,
		BoundFailures: r.failures(), LastRetentionErrorMsg: r.lastRetentionError,
	}
	if r.events > 0 {
		f.CommandsPerEvent = round(float64(total)/float64(r.events), 2)
	}
	f.Pass = len(f.BoundFailures) == 0
	return f
}

// indexCell is a checkpoint's indexes' size in MB, and with -soak-reindex the size after the
// rebuild and its time: "112.9 → 0.3 in 905 ms"; "-" where the server does not tell it.
func indexCell(cp soakCheckpoint) string {
	mb := func(b *int64) string {
		if b == nil {
			return "-"
		}
		return fmt.Sprintf("%.1f", mebibytes(uint64(*b)))
	}
	if cp.ReindexMs == nil {
		return mb(cp.IndexBytes)
	}
	return fmt.Sprintf("%s → %s in %.0f ms", mb(cp.IndexBytes), mb(cp.IndexBytesAfter), *cp.ReindexMs)
}

// print writes the soak's table: a row per checkpoint, then the plans and the totals.
func (r *soakReport) print(out io.Writer) {
	c := r.cfg
	fmt.Fprintf(out, "execstore bench -soak: %d events over %g simulated days, %d executions live, one database, %s\n",
		c.soakEvents, c.soakDays, c.soakLive, r.server)
	fmt.Fprintf(out, "retention Done %v, Failed %v, Cancelled %v, run every %v by the simulated clock (wall clock + %.1f s per event)\n",
		c.soakRetention.Done, c.soakRetention.Failed, c.soakRetention.Cancelled, soakRetentionInterval,
		c.soakDays*24*3600/float64(c.soakEvents))
	fmt.Fprintln(out, "finish times are the committers' wall clock: an execution finished at wall T is deleted once simulated now − retention ≥ T")
	fmt.Fprintf(out, "bound: documents ≤ live + within retention + recent (deletable for less than %v, -soak-slack)\n", c.soakSlack)
	fmt.Fprintln(out, "costs: wall ms of one call (median of 3) with, where the server's explain has executionStats, keys/docs examined; returned items in brackets")
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "events\tsim day\tdocs\tlive\twithin\trecent\tbound\tdeleted\toutbox scan\tdue timers\tretention\tlist page\tcmds/event\tindex MB\t")
	for _, cp := range r.checkpoints {
		fmt.Fprintf(tw, "%d\t%.1f\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%.2f\t%s\t\n", cp.Events, cp.SimulatedDay, cp.Documents,
			cp.Live, cp.WithinRetention, cp.Recent, cp.Bound, cp.Deleted, costCell(cp.Costs[costOutbox]),
			costCell(cp.Costs[costTimers]), costCell(cp.Costs[costRetention]), costCell(cp.Costs[costList]), cp.CommandsPerEvent,
			indexCell(cp))
	}
	tw.Flush()
	fmt.Fprintln(out)
	if n := len(r.checkpoints); n > 0 {
		first, last := r.checkpoints[0], r.checkpoints[n-1]
		for _, name := range soakCosts {
			if a, b := first.Costs[name].Plan, last.Costs[name].Plan; a == b {
				fmt.Fprintf(out, "plan of the %s: %s\n", name, a)
			} else {
				fmt.Fprintf(out, "plan of the %s: %s at the first checkpoint, %s at the last\n", name, a, b)
			}
		}
	}
	fmt.Fprintf(out, "%d events in %.1f s: %.1f events/s; %d executions deleted by the relay's retention (%d retention errors), %d duplicates skipped, %d conflicts, %d stale loads read again\n",
		r.events, r.wall.Seconds(), r.eventsPerS(), r.relay.Retained, r.retentionErrors, r.duplicates, r.conflicts, r.staleLoads)
	if r.lastRetentionError != "" {
		fmt.Fprintf(out, "last retention error: %s\n", r.lastRetentionError)
	}
}

// costCell is a measured call as the table shows it: "3.1 [12]", or with explain's
// executionStats "3.1 k12/d12 [12]".
func costCell(c soakCost) string {
	s := fmt.Sprintf("%.1f", c.Ms)
	if c.KeysExamined != nil && c.DocsExamined != nil {
		s += fmt.Sprintf(" k%d/d%d", *c.KeysExamined, *c.DocsExamined)
	}
	return fmt.Sprintf("%s [%d]", s, c.Returned)
}
