package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/ops"
)

// rawWrites is the server's ceiling for the workload's writes: per event, the update the
// store's commit sends (built by ops.BuildCommit, guarded by {_id, version}) and the update
// its ack sends, over the bare driver, at the same concurrency, with nothing else: no loads,
// no dedupe, no seq reservations, no outbox scans, no timer sweeps. The versions and seqs
// are kept in memory, and events go from the handler that emits them straight to the
// relay, in the same pattern as the engine's (the same targets, the same commits).
type rawWrites struct {
	cfg      config
	uri      string
	database string
	cmds     *commandCounter
	client   *mongo.Client
	env      opsrun.Env
	ids      []string
	index    map[string]int
	exes     []rawExecution // by position in ids; each touched only by the handler its id routes to
	starts   []int64        // outbox seq of each start event
	seq      atomic.Int64   // the last outbox seq used
	children chan delivery  // events emitted by handlers, for the relay

	commits, commitMisses, ackMisses atomic.Int64
}

// rawExecution is what raw keeps of an execution in memory.
type rawExecution struct {
	version   int64
	traceNext int64
	handled   int
}

func newRaw(cfg config, uri, database string) *rawWrites {
	r := &rawWrites{
		cfg:      cfg,
		uri:      uri,
		database: database,
		cmds:     newCommandCounter(),
		ids:      executionIDs(cfg.executions),
		children: make(chan delivery, cfg.events),
	}
	r.index = make(map[string]int, len(r.ids))
	for i, id := range r.ids {
		r.index[id] = i
	}
	r.exes = make([]rawExecution, len(r.ids))
	return r
}

func (r *rawWrites) name() string { return variantRaw }

func (r *rawWrites) commands() commandCounts { return r.cmds.snapshot() }

// pathCommands is every command: raw has no relay and no sweeper, only the handlers' writes.
func (r *rawWrites) pathCommands() commandCounts { return r.cmds.snapshot() }

func (r *rawWrites) counts() map[string]int64 {
	return map[string]int64{"commit_misses": r.commitMisses.Load(), "ack_misses": r.ackMisses.Load()}
}

func (r *rawWrites) close(ctx context.Context) error {
	if r.client == nil {
		return nil
	}
	return r.client.Disconnect(ctx)
}

// setup creates the store's indexes, so that the writes maintain the same ones, and inserts
// every execution as the store's create would write it, the first ones with their start
// event in the outbox.
func (r *rawWrites) setup(ctx context.Context) error {
	client, err := mongo.Connect(options.Client().ApplyURI(r.uri).SetMonitor(r.cmds.monitor()))
	if err != nil {
		return err
	}
	r.client = client
	server, err := connect.DetectServer(ctx, client)
	if err != nil {
		return err
	}
	profile := server.Profile
	db := client.Database(r.database)
	r.env = opsrun.Env{
		Layout:     ops.Layout{Profile: profile, TraceMax: contract.DefaultTraceMax},
		Executions: db.Collection(ops.ExecutionsCollection),
		Counters:   db.Collection(ops.CountersCollection),
	}
	if err := opsrun.EnsureIndexes(ctx, r.env); err != nil {
		return err
	}
	data, err := json.Marshal(snapshot{})
	if err != nil {
		return err
	}
	r.starts = make([]int64, len(r.ids))
	docs := make([]any, 0, len(r.ids))
	for i, id := range r.ids {
		exe := &execstore.Execution{ID: id, DefinitionID: definitionID, Status: execstore.Running, Data: data}
		var c execstore.Commit
		var seqs ops.Seqs
		if i < r.cfg.events {
			c.Emits = []execstore.Emit{{TargetID: id, Event: encodeEvent(i)}}
			r.starts[i] = r.seq.Add(1)
			seqs.Outbox = []int64{r.starts[i]}
		}
		p, err := ops.BuildCommit(r.env.Layout, exe, &c, seqs)
		if err != nil {
			return err
		}
		docs = append(docs, p.Insert)
		r.exes[i] = rawExecution{version: 1, traceNext: p.TraceNext}
	}
	_, err = r.env.Executions.InsertMany(ctx, docs)
	return err
}

// inboxDepth bounds the deliveries queued for one of raw's handlers.
const inboxDepth = 256

// run hands the start events, then every event a handler emits, to concurrency handlers
// (each execution's to the one that owns it), until the budget is handled. Raw has no outbox
// to relay: the events go from the handler that emits them straight to the one that handles
// them, in memory, which is what makes it the server's ceiling for the writes alone.
func (r *rawWrites) run(ctx context.Context, concurrency int, l *loop) error {
	inboxes := make([]chan delivery, concurrency)
	for i := range inboxes {
		inboxes[i] = make(chan delivery, inboxDepth)
	}
	g, gctx := errgroup.WithContext(ctx)
	for _, inbox := range inboxes {
		g.Go(func() error {
			for d := range inbox {
				l.started()
				t0 := time.Now()
				processed, err := r.handle(gctx, d)
				l.handled(processed, time.Since(t0), err)
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	g.Go(func() error {
		defer func() {
			for _, inbox := range inboxes {
				close(inbox)
			}
		}()
		deliver := func(d delivery) error {
			select {
			case inboxes[route(d.target, len(inboxes))] <- d:
				return nil
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		delivered := 0
		for i, id := range r.ids {
			if i >= r.cfg.events {
				break
			}
			if err := deliver(delivery{target: id, id: eventID(i), n: i, source: id, seq: r.starts[i]}); err != nil {
				return err
			}
			delivered++
		}
		for delivered < r.cfg.events {
			select {
			case d := <-r.children:
				if err := deliver(d); err != nil {
					return err
				}
				delivered++
			case <-gctx.Done():
				return gctx.Err()
			}
		}
		return nil
	})
	return g.Wait()
}

// handle sends the commit's update for d, then the ack's update of d's outbox entry.
func (r *rawWrites) handle(ctx context.Context, d delivery) (bool, error) {
	i := r.index[d.target]
	x := &r.exes[i]
	data, err := json.Marshal(snapshot{Handled: x.handled + 1, Last: d.id})
	if err != nil {
		return false, err
	}
	exe := &execstore.Execution{ID: d.target, DefinitionID: definitionID, Status: execstore.Running,
		Version: x.version, Data: data, TraceNext: x.traceNext}
	c, p := eventCommit(r.cfg.seed, r.ids, r.index, r.cfg.events, d, x.handled+1)
	var seqs ops.Seqs
	if len(c.Emits) > 0 {
		seqs.Outbox = []int64{r.seq.Add(1)}
	}
	cp, err := ops.BuildCommit(r.env.Layout, exe, &c, seqs)
	if err != nil {
		return false, err
	}
	res, err := r.env.Executions.UpdateOne(ctx, cp.Filter, cp.Update)
	if err != nil {
		return false, fmt.Errorf("commit update of %s: %w", d.target, err)
	}
	if res.MatchedCount != 1 {
		r.commitMisses.Add(1)
	} else {
		r.commits.Add(1)
		x.version++
		x.traceNext = cp.TraceNext
		x.handled++
	}
	filter, update := rawAck(d.source, d.seq)
	res, err = r.env.Executions.UpdateOne(ctx, filter, update)
	if err != nil {
		return false, fmt.Errorf("ack update of %s: %w", d.source, err)
	}
	if res.MatchedCount != 1 {
		r.ackMisses.Add(1)
	}
	if p.child >= 0 {
		r.children <- delivery{target: p.target, id: eventID(p.child), n: p.child, source: d.target, seq: seqs.Outbox[0]}
	}
	return true, nil
}

// rawAck is the store's ack of outbox entry seq of execution id (ops/relay.go): the entry is
// a field of the outbox sub-document, removed with $unset while the count drops by one, only
// if it is still there.
func rawAck(id string, seq int64) (filter, update bson.D) {
	key := "outbox." + strconv.FormatInt(seq, 10)
	filter = bson.D{{Key: "_id", Value: id}, {Key: key, Value: bson.D{{Key: "$exists", Value: true}}}}
	update = bson.D{
		{Key: "$unset", Value: bson.D{{Key: key, Value: ""}}},
		{Key: "$inc", Value: bson.D{{Key: "outbox_n", Value: int64(-1)}}},
	}
	return filter, update
}

func (r *rawWrites) callTimes() map[string][]time.Duration { return nil }

func (r *rawWrites) finish(context.Context) error { return nil }

// check verifies that every update matched, and that the documents agree: versions adding
// up to the commits, no outbox entry left.
func (r *rawWrites) check(ctx context.Context) ([]check, error) {
	cur, err := r.env.Executions.Find(ctx, bson.D{},
		options.Find().SetProjection(bson.D{{Key: "version", Value: 1}, {Key: "outbox_n", Value: 1}}))
	if err != nil {
		return nil, err
	}
	var docs []rawStored
	if err := cur.All(ctx, &docs); err != nil {
		return nil, err
	}
	t := rawTally{
		executions:   len(r.ids),
		events:       r.cfg.events,
		commits:      r.commits.Load(),
		commitMisses: r.commitMisses.Load(),
		ackMisses:    r.ackMisses.Load(),
	}
	return rawChecks(t, docs), nil
}

// rawTally is what raw counted during a run, as its end-of-run checks read it.
type rawTally struct {
	executions, events      int
	commits                 int64 // commit updates that matched
	commitMisses, ackMisses int64 // updates that matched nothing
}

// rawStored is what raw's checks read of one stored execution.
type rawStored struct {
	Version int64 `bson:"version"`
	OutboxN int64 `bson:"outbox_n"`
}

// rawChecks checks a raw run: every update matched, the stored versions add up to the
// creates and the commits, and the outbox is empty.
func rawChecks(t rawTally, docs []rawStored) []check {
	var versions, pending int64
	for _, d := range docs {
		versions += d.Version
		pending += d.OutboxN
	}
	want := t.commits + int64(t.executions)
	return []check{
		{name: "every update matched", ok: t.commitMisses == 0 && t.ackMisses == 0 && t.commits == int64(t.events),
			detail: fmt.Sprintf("%d commits of %d events, %d commit updates and %d ack updates matched nothing",
				t.commits, t.events, t.commitMisses, t.ackMisses)},
		{name: "stored versions add up to the updates", ok: versions == want && len(docs) == t.executions,
			detail: fmt.Sprintf("sum of versions %d over %d documents, expected %d over %d",
				versions, len(docs), want, t.executions)},
		{name: "outbox empty at the end", ok: pending == 0, detail: fmt.Sprintf("%d pending", pending)},
	}
}
