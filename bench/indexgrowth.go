package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
)

// The index-growth run (-index-growth N) asks whether a server's indexes keep what deleted
// documents left in them, and whether the store's scans pay for it. It keeps a fixed set of
// live executions, times three of the relay family's reads over them, then passes N
// executions through the collection as they pass in use (created running with a timer,
// finished, deleted), and times the reads again: at once, after the server's autovacuum has
// had a minute, and after a reIndex. The live set is the same each time; what differs is only
// what the N left behind.
const (
	growthLive       = 1000 // live executions, each running with a timer an hour ahead
	growthBatch      = 1000 // executions per insertMany, updateMany and deleteMany of the churn
	growthReps       = 15   // calls of each read per measure; the median and the fastest
	growthListPage   = 100
	growthVacuumWait = 70 * time.Second // the server's autovacuum runs every minute by default
)

// growthMeasure is one row of the run's report.
type growthMeasure struct {
	label      string
	indexBytes *int64
	calls      map[string][2]time.Duration // median, fastest
}

var growthCalls = []string{costTimers, costRetention, costList}

// indexGrowth runs the index-growth measurement.
func indexGrowth(ctx context.Context, cfg config) (status int, err error) {
	cfg.rtts = []time.Duration{0}
	cfg.variants = []string{variantBatch}
	env, err := startEnvironment(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, env.close()) }()
	database := fmt.Sprintf("bench_%s_%d_growth", time.Now().UTC().Format("20060102_150405"), os.Getpid())
	defer func() { err = errors.Join(err, env.tearDown(ctx, cfg, database, nil)) }()
	store, err := aio.Open(ctx, env.uri, aio.Options{Connection: server.Connection{Database: database}})
	if err != nil {
		return 1, err
	}
	defer store.Close(context.WithoutCancel(ctx))
	client, err := mongo.Connect(options.Client().ApplyURI(env.uri))
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, client.Disconnect(context.WithoutCancel(ctx))) }()
	db := client.Database(database)
	coll := db.Collection(ops.ExecutionsCollection)
	layout := ops.Layout{Profile: store.Server().Profile, TraceMax: 200, Partitions: store.Partitions()}

	insert := func(prefix string, from, n int, fireAt time.Time) ([]string, error) {
		docs := make([]any, 0, n)
		ids := make([]string, 0, n)
		for i := from; i < from+n; i++ {
			exe := &execstore.Execution{ID: fmt.Sprintf("%s-%09d", prefix, i), DefinitionID: fmt.Sprintf("def-%d", i%10),
				Status: execstore.Running, Data: []byte(`{"step":1}`)}
			c := execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", fireAt.Add(time.Duration(i)*time.Microsecond))}}
			plan, err := ops.BuildCommit(layout, exe, &c, ops.Seqs{At: ops.CommitTime()})
			if err != nil {
				return nil, err
			}
			docs = append(docs, plan.Insert)
			ids = append(ids, exe.ID)
		}
		_, err := coll.InsertMany(ctx, docs)
		return ids, err
	}
	if _, err := insert("live", 0, growthLive, time.Now().Add(time.Hour)); err != nil {
		return 1, fmt.Errorf("inserting the live executions: %w", err)
	}

	all := ops.AllPartitions(store.Partitions())
	measure := func(label string) (growthMeasure, error) {
		m := growthMeasure{label: label, calls: map[string][2]time.Duration{}}
		cutoffs := execstore.DefaultRetention.Cutoffs(time.Now().Add(30 * 24 * time.Hour))
		calls := map[string]func() error{
			costTimers: func() error { _, err := store.DueTimersIn(ctx, all, time.Now(), 0); return err },
			costRetention: func() error {
				_, err := store.ExpiredIn(ctx, all, cutoffs, soakRetentionBatch)
				return err
			},
			costList: func() error {
				_, err := store.List(ctx, execstore.ListQuery{Statuses: []execstore.Status{execstore.Running}, Limit: growthListPage})
				return err
			},
		}
		for _, name := range growthCalls {
			times := make([]time.Duration, 0, growthReps)
			for range growthReps {
				t := time.Now()
				if err := calls[name](); err != nil {
					return m, fmt.Errorf("%s: %w", name, err)
				}
				times = append(times, time.Since(t))
			}
			slices.Sort(times)
			m.calls[name] = [2]time.Duration{times[len(times)/2], times[0]}
		}
		m.indexBytes = totalIndexSize(ctx, db)
		fmt.Fprintf(os.Stderr, "bench: index growth: measured %s\n", label)
		return m, nil
	}

	var rows []growthMeasure
	add := func(label string) error {
		m, err := measure(label)
		rows = append(rows, m)
		return err
	}
	if err := add(fmt.Sprintf("%d live", growthLive)); err != nil {
		return 1, err
	}
	for from := 0; from < cfg.indexGrowth; from += growthBatch {
		n := min(growthBatch, cfg.indexGrowth-from)
		ids, err := insert("gone", from, n, time.Now().Add(-time.Minute))
		if err != nil {
			return 1, fmt.Errorf("churn: inserting: %w", err)
		}
		in := bson.D{{Key: "_id", Value: bson.D{{Key: "$in", Value: ids}}}}
		finish := bson.D{
			{Key: "$set", Value: bson.D{{Key: ops.FieldStatus, Value: string(execstore.Done)}, {Key: ops.FieldFinishedAt, Value: time.Now().UTC()}}},
			{Key: "$unset", Value: bson.D{{Key: ops.FieldTimers, Value: ""}, {Key: ops.FieldTimerMin, Value: ""}}},
		}
		if _, err := coll.UpdateMany(ctx, in, finish); err != nil {
			return 1, fmt.Errorf("churn: finishing: %w", err)
		}
		if _, err := coll.DeleteMany(ctx, in); err != nil {
			return 1, fmt.Errorf("churn: deleting: %w", err)
		}
	}
	if err := add(fmt.Sprintf("after %d more came and went", cfg.indexGrowth)); err != nil {
		return 1, err
	}
	fmt.Fprintf(os.Stderr, "bench: index growth: waiting %v for the server's autovacuum\n", growthVacuumWait)
	select {
	case <-ctx.Done():
		return 1, context.Cause(ctx)
	case <-time.After(growthVacuumWait):
	}
	if err := add(fmt.Sprintf("  %v later", growthVacuumWait)); err != nil {
		return 1, err
	}
	reindex := "  after reIndex"
	if err := db.RunCommand(ctx, bson.D{{Key: "reIndex", Value: ops.ExecutionsCollection}}).Err(); err != nil {
		reindex = "  reIndex refused: " + err.Error()
	}
	if err := add(reindex); err != nil {
		return 1, err
	}

	fmt.Printf("index growth: %d live executions, %d more passed through (created running with a timer, finished, deleted), on %s\n",
		growthLive, cfg.indexGrowth, env.description)
	fmt.Printf("each read %d times: median (fastest), ms; the indexes' size by collStats\n\n", growthReps)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tdue timers\tretention\tlist page\tindex MB\t")
	for _, r := range rows {
		cells := []string{r.label}
		for _, name := range growthCalls {
			c := r.calls[name]
			cells = append(cells, fmt.Sprintf("%.1f (%.1f)", millis(c[0]), millis(c[1])))
		}
		size := "-"
		if r.indexBytes != nil {
			size = fmt.Sprintf("%.1f", mebibytes(uint64(*r.indexBytes)))
		}
		fmt.Fprintln(tw, strings.Join(append(cells, size), "\t")+"\t")
	}
	return 0, tw.Flush()
}

// totalIndexSize is the executions collection's indexes' size by collStats, or nil where the
// server does not answer it.
func totalIndexSize(ctx context.Context, db *mongo.Database) *int64 {
	var stats struct {
		TotalIndexSize *int64 `bson:"totalIndexSize"`
	}
	if err := db.RunCommand(ctx, bson.D{{Key: "collStats", Value: ops.ExecutionsCollection}}).Decode(&stats); err != nil {
		return nil
	}
	return stats.TotalIndexSize
}
