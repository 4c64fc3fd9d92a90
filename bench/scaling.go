package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// Scaling mode.
const (
	scalingInsertBatch = 1000             // documents per insertMany while loading
	scalingDesignTime  = 15 * time.Second // timed sweeps of one design stop after this (one at least)
)

// sweepResult is one (size, design) row of the scaling report and of bench-scaling.json.
type sweepResult struct {
	Executions       int     `json:"executions"`
	Design           string  `json:"design"` // "store" (indexed timer_min hint) or "seed" (whole-collection scan)
	Due              int     `json:"due"`
	Found            int     `json:"found"`
	Sweeps           int     `json:"sweeps"`
	MsPerSweep       float64 `json:"ms_per_sweep"` // median
	CommandsPerSweep float64 `json:"commands_per_sweep"`
	DocsExamined     *int64  `json:"total_docs_examined,omitempty"` // explain executionStats (MongoDB)
	KeysExamined     *int64  `json:"total_keys_examined,omitempty"`
	DocsReturned     *int64  `json:"n_returned,omitempty"`
	Plan             string  `json:"plan"`
	LoadS            float64 `json:"load_s"` // time to insert the collection
	Server           string  `json:"server"`
}

// sweepDesign is one of the two sweeps compared.
type sweepDesign struct {
	name       string
	filter     bson.D
	projection bson.D
	sort       bson.D // nil for none
	hint       string // "" for none
	sweep      func(ctx context.Context, now time.Time) (int, error)
	cmds       *commandCounter
}

// scaling measures the store's timer sweep against the seed's at each -scaling-sizes size,
// with -scaling-due due timers in the collection each time.
func scaling(ctx context.Context, cfg config) (status int, err error) {
	cfg.rtts = []time.Duration{0} // the sweep's cost is the server's; no proxy
	env, err := startEnvironment(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, env.close()) }()

	stamp := time.Now().UTC().Format("20060102_150405")
	var results []sweepResult
	for _, size := range cfg.scalingSizes {
		db := fmt.Sprintf("bench_%s_%d_scaling_%d", stamp, os.Getpid(), size)
		rows, err := env.scalingAt(ctx, cfg, db, size)
		if !cfg.keep {
			env.dropAtEnd(db)
		}
		if err != nil {
			return 1, fmt.Errorf("scaling at %d executions: %w", size, err)
		}
		results = append(results, rows...)
	}
	writeScaling(os.Stdout, env.description, results)
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return 1, err
	}
	path := filepath.Join(cfg.out, "bench-scaling.json")
	if err := writeJSON(path, results); err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stdout, "wrote %s\n", path)
	for _, r := range results {
		if r.Found != r.Due {
			return 1, nil
		}
	}
	return 0, nil
}

// scalingAt loads size executions into database db and measures both sweeps there.
func (e *environment) scalingAt(ctx context.Context, cfg config, db string, size int) ([]sweepResult, error) {
	storeCmds := newCommandCounter()
	store, err := aio.Open(ctx, e.uri, aio.Options{ // creates the indexes before the load
		Connection: server.Connection{Database: db, ClientOptions: options.Client().SetMonitor(storeCmds.monitor())},
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = store.Close(cctx)
	}()
	seed := newSeedPort(e.uri, db)
	if err := seed.open(ctx); err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := cleanupContext(ctx)
		defer cancel()
		_ = seed.close(cctx)
	}()

	fmt.Fprintf(os.Stderr, "bench: loading %d executions, %d of them with a due timer\n", size, cfg.scalingDue)
	now := time.Now()
	t0 := time.Now()
	if err := e.loadTimers(ctx, db, size, cfg.scalingDue, now, store.Partitions()); err != nil {
		return nil, err
	}
	load := time.Since(t0)

	dueScan := ops.DueScan(ops.AllPartitions(store.Partitions()), now)
	designs := []sweepDesign{
		{
			name: "store", cmds: storeCmds,
			// The find opsrun.DueTimers sends, over every partition.
			filter:     dueScan.Filter,
			projection: bson.D{{Key: "timers", Value: 1}, {Key: "timer_min", Value: 1}, {Key: "version", Value: 1}},
			sort:       dueScan.Sort,
			hint:       dueScan.Hint,
			sweep: func(ctx context.Context, now time.Time) (int, error) {
				due, err := store.DueTimers(ctx, now, 0)
				return len(due), err
			},
		},
		{
			name: "seed", cmds: seed.cmds,
			filter:     bson.D{{Key: "timers", Value: bson.D{{Key: "$exists", Value: true}, {Key: "$ne", Value: bson.D{}}}}},
			projection: bson.D{{Key: "timers", Value: 1}},
			sweep: func(ctx context.Context, now time.Time) (int, error) {
				due, err := seed.dueTimers(ctx, now, 0)
				return len(due), err
			},
		},
	}
	var rows []sweepResult
	for _, d := range designs {
		fmt.Fprintf(os.Stderr, "bench: %d executions: timing the %s sweep\n", size, d.name)
		r := sweepResult{Executions: size, Design: d.name, Due: cfg.scalingDue, LoadS: round(load.Seconds(), 2), Server: e.description}
		var times []time.Duration
		before := d.cmds.snapshot()
		start := time.Now()
		for len(times) < cfg.scalingReps && (len(times) == 0 || time.Since(start) < scalingDesignTime) {
			t := time.Now()
			found, err := d.sweep(ctx, now)
			if err != nil {
				return nil, fmt.Errorf("%s sweep: %w", d.name, err)
			}
			times = append(times, time.Since(t))
			r.Found = found
		}
		r.Sweeps = len(times)
		r.MsPerSweep = round(millis(percentile(sortedDurations(times), 50)), 2)
		r.CommandsPerSweep = round(float64(d.cmds.snapshot().since(before).total())/float64(len(times)), 2)
		if err := e.explain(ctx, db, d, &r); err != nil {
			return nil, fmt.Errorf("explaining the %s sweep: %w", d.name, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// loadTimers inserts size executions shaped as the store creates them (ops.BuildCommit), each
// with one timer: due ones fire a minute before now and are spread evenly through the
// collection, the others fire an hour or more after it.
func (e *environment) loadTimers(ctx context.Context, db string, size, due int, now time.Time, partitions int) error {
	layout := ops.Layout{Profile: e.info.Profile, TraceMax: contract.DefaultTraceMax, Partitions: partitions}
	coll := e.admin.Database(db).Collection(ops.ExecutionsCollection)
	data := []byte(`{"handled":3,"last":"ev-0000000"}`)
	every := size / due
	docs := make([]any, 0, scalingInsertBatch)
	for i := range size {
		fireAt := now.Add(time.Hour + time.Duration(i)*time.Second)
		if i%every == 0 && i/every < due {
			fireAt = now.Add(-time.Minute + time.Duration(i)*time.Microsecond)
		}
		exe := &execstore.Execution{
			ID: fmt.Sprintf("exe-%07d", i), DefinitionID: definitionID, Status: execstore.Running, Data: data}
		c := execstore.Commit{ProcessedEventID: eventID(i), Timers: []execstore.TimerOp{execstore.ScheduleTimer(timerPath, fireAt)}}
		p, err := ops.BuildCommit(layout, exe, &c, ops.Seqs{})
		if err != nil {
			return err
		}
		docs = append(docs, p.Insert)
		if len(docs) == scalingInsertBatch || i == size-1 {
			if _, err := coll.InsertMany(ctx, docs, options.InsertMany().SetOrdered(false)); err != nil {
				return fmt.Errorf("inserting executions: %w", err)
			}
			docs = docs[:0]
		}
	}
	return nil
}

// explain runs the design's find under explain and records what the server says of it:
// executionStats on MongoDB, the SQLite plan and whether the filter was pushed down on
// FerretDB.
func (e *environment) explain(ctx context.Context, db string, d sweepDesign, r *sweepResult) error {
	find := bson.D{{Key: "find", Value: ops.ExecutionsCollection}, {Key: "filter", Value: d.filter},
		{Key: "projection", Value: d.projection}}
	if d.sort != nil {
		find = append(find, bson.E{Key: "sort", Value: d.sort})
	}
	if d.hint != "" {
		find = append(find, bson.E{Key: "hint", Value: d.hint})
	}
	var out bson.Raw
	err := e.admin.Database(db).RunCommand(ctx, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "executionStats"}}).Decode(&out)
	if err != nil {
		return err
	}
	if stats, ok := out.Lookup("executionStats").DocumentOK(); ok {
		r.DocsExamined = lookupInt(stats, "totalDocsExamined")
		r.KeysExamined = lookupInt(stats, "totalKeysExamined")
		r.DocsReturned = lookupInt(stats, "nReturned")
	}
	if plan, ok := out.Lookup("queryPlanner", "winningPlan").DocumentOK(); ok {
		r.Plan = planStages(plan)
	} else if steps, ok := out.Lookup("queryPlanner", "Plan").ArrayOK(); ok {
		var lines []string
		vals, _ := steps.Values()
		for _, v := range vals {
			if s, ok := v.StringValueOK(); ok {
				// "id=2 parent=0 notused=0 detail=SCAN executions_a6c248d2": keep the detail.
				if _, detail, found := strings.Cut(s, "detail="); found {
					s = detail
				}
				lines = append(lines, s)
			}
		}
		r.Plan = "SQLite: " + strings.Join(lines, "; ")
		if push, ok := out.Lookup("filterPushdown").BooleanOK(); ok {
			r.Plan += fmt.Sprintf("; filterPushdown %v", push)
		}
	}
	return nil
}

// planStages summarizes a MongoDB winning plan as its stages from the top, with the index
// an index scan uses: "FETCH < IXSCAN pending_timers_by_partition".
func planStages(plan bson.Raw) string {
	var stages []string
	for plan != nil {
		stage, _ := plan.Lookup("stage").StringValueOK()
		if idx, ok := plan.Lookup("indexName").StringValueOK(); ok {
			stage += " " + idx
		}
		stages = append(stages, stage)
		next, ok := plan.Lookup("inputStage").DocumentOK()
		if !ok {
			break
		}
		plan = next
	}
	return strings.Join(stages, " < ")
}

func lookupInt(doc bson.Raw, key string) *int64 {
	v := doc.Lookup(key)
	var n int64
	switch {
	case v.Type == bson.TypeInt32:
		n = int64(v.Int32())
	case v.Type == bson.TypeInt64:
		n = v.Int64()
	case v.Type == bson.TypeDouble:
		n = int64(v.Double())
	default:
		return nil
	}
	return &n
}

// writeScaling prints the scaling table.
func writeScaling(out io.Writer, server string, results []sweepResult) {
	fmt.Fprintf(out, "execstore bench -scaling: timer sweep cost by collection size, %s\n", server)
	fmt.Fprintln(out, "store: find on the timer_min hint (index pending_timers_by_partition); seed: whole-collection find, fire times checked by the client")
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "executions\tdesign\tdue\tfound\tsweeps\tms/sweep\tcmds/sweep\tdocs examined\tkeys examined\treturned\tplan")
	opt := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	for _, r := range results {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%s\t%s\t%s\t%s\n", r.Executions, r.Design, r.Due, r.Found,
			r.Sweeps, r.MsPerSweep, r.CommandsPerSweep, opt(r.DocsExamined), opt(r.KeysExamined), opt(r.DocsReturned), r.Plan)
	}
	tw.Flush()
	fmt.Fprintln(out)
	sizes := []int{}
	for _, r := range results {
		if !slices.Contains(sizes, r.Executions) {
			sizes = append(sizes, r.Executions)
		}
	}
	for _, n := range sizes {
		var st, sd *sweepResult
		for i := range results {
			if results[i].Executions == n && results[i].Design == "store" {
				st = &results[i]
			}
			if results[i].Executions == n && results[i].Design == "seed" {
				sd = &results[i]
			}
		}
		if st != nil && sd != nil && st.MsPerSweep > 0 {
			fmt.Fprintf(out, "%d executions: the seed's sweep takes %.1f× the store's time and %.1f× its commands (loaded in %.1f s)\n",
				n, sd.MsPerSweep/st.MsPerSweep, sd.CommandsPerSweep/max(st.CommandsPerSweep, 1e-9), st.LoadS)
		}
	}
	for _, r := range results {
		if r.Found != r.Due {
			fmt.Fprintf(out, "FAIL: the %s sweep at %d executions found %d due timers, %d are due\n", r.Design, r.Executions, r.Found, r.Due)
		}
	}
}
