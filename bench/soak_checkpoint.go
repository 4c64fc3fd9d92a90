package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/ops"
)

// Checkpoints of the soak.
const (
	// soakCostReps is how many times each measured call is made at a checkpoint; its time is
	// their median.
	soakCostReps = 3
	// soakRetentionBatch is the relay's Batch (its default), the limit of its retention reads.
	soakRetentionBatch = 256
	soakListPage       = 100
)

// The measured calls, in the order they are reported.
const (
	costOutbox    = "outbox_scan"
	costTimers    = "due_timer_scan"
	costRetention = "retention_scan"
	costList      = "list_page"
)

var soakCosts = []string{costOutbox, costTimers, costRetention, costList}

// soakCheckpoint is one row of the soak's table and of bench-soak.json.
type soakCheckpoint struct {
	Events       int64   `json:"events"`        // events driven when it was taken
	SimulatedDay float64 `json:"simulated_day"` // the simulated clock's offset, in days
	WallS        float64 `json:"wall_s"`        // since the soak started
	Documents    int64   `json:"documents"`     // countDocuments of the executions collection
	Live         int64   `json:"live"`          // executions created (or being created) and not finished
	// WithinRetention are the finished executions the retention must keep: finished at a
	// wall time after simulated now − their status's retention.
	WithinRetention int64 `json:"within_retention"`
	// Recent are the other finished executions that became deletable less than -soak-slack
	// ago: the slack of the bound.
	Recent           int64            `json:"recent"`
	Bound            int64            `json:"bound"` // Live + WithinRetention + Recent
	BoundMet         bool             `json:"bound_met"`
	Deleted          int64            `json:"deleted"` // RetentionTotals, every status
	DeletedByStatus  map[string]int64 `json:"deleted_by_status"`
	CommandsPerEvent float64          `json:"commands_per_event"` // the soak's clients, since its start
	// IndexBytes is the executions collection's indexes' size (collStats' totalIndexSize),
	// measured after the costs; absent where the server does not tell it.
	IndexBytes *int64 `json:"index_bytes,omitempty"`
	// ReindexMs is how long the reIndex after the measures took (-soak-reindex), and
	// IndexBytesAfter the indexes' size after it.
	ReindexMs       *float64            `json:"reindex_ms,omitempty"`
	IndexBytesAfter *int64              `json:"index_bytes_after,omitempty"`
	Costs           map[string]soakCost `json:"costs"`
	// Held is taken only when the bound is not met: the finished documents by what keeps the
	// retention from deleting them.
	Held map[string]int64 `json:"held,omitempty"`
}

// soakCost is what one measured call costs at a checkpoint.
type soakCost struct {
	Ms       float64 `json:"ms"`       // wall time, the median of soakCostReps calls
	Returned int     `json:"returned"` // items the call returned
	// KeysExamined and DocsExamined are explain's executionStats (MongoDB); absent where the
	// server gives none (FerretDB, DocumentDB).
	KeysExamined *int64 `json:"keys_examined,omitempty"`
	DocsExamined *int64 `json:"docs_examined,omitempty"`
	Plan         string `json:"plan"` // the server's plan, summarized
}

// checkpoints samples the clock and takes a checkpoint every -soak/-soak-checkpoints events
// and at the last, until every event is driven.
func (s *soakRun) checkpoints(ctx context.Context, report *soakReport) error {
	tick := time.NewTicker(soakSampleEvery)
	defer tick.Stop()
	total := int64(s.cfg.soakEvents)
	every := max(total/int64(s.cfg.soakCheckpoints), 1)
	next := every
	last, lastAt := int64(0), time.Now()
	for {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
		s.clock.sample()
		n := s.driven.Load()
		if n != last {
			last, lastAt = n, time.Now()
		} else if time.Since(lastAt) > soakStallAfter {
			return fmt.Errorf("no event driven for %v, at %d of %d events: %s", soakStallAfter, n, total, s.stalled(ctx))
		}
		if n < next && n < total {
			continue
		}
		cp, err := s.checkpoint(ctx)
		if err != nil {
			return fmt.Errorf("checkpoint at %d events: %w", n, err)
		}
		report.checkpoints = append(report.checkpoints, cp)
		fmt.Fprintf(os.Stderr, "bench: soak %d/%d events, simulated day %.1f: %d documents (bound %d), %d deleted\n",
			cp.Events, total, cp.SimulatedDay, cp.Documents, cp.Bound, cp.Deleted)
		for next <= n {
			next += every
		}
		if n >= total {
			return nil
		}
	}
}

// checkpoint counts the documents, checks them against the bound and measures the calls.
func (s *soakRun) checkpoint(ctx context.Context) (soakCheckpoint, error) {
	cp := soakCheckpoint{Events: s.driven.Load(), SimulatedDay: round(s.clock.offset().Hours()/24, 2)}
	t0 := time.Now()
	docs, err := s.env.admin.Database(s.database).Collection(ops.ExecutionsCollection).CountDocuments(ctx, bson.D{})
	if err != nil {
		return cp, fmt.Errorf("counting the executions: %w", err)
	}
	at := time.Now()
	cp.WallS = round(at.Sub(s.started).Seconds(), 1)
	cp.Documents = docs
	cp.Live, cp.WithinRetention, cp.Recent = s.expected(at, s.cfg.soakSlack+at.Sub(t0))
	cp.Bound = cp.Live + cp.WithinRetention + cp.Recent
	cp.BoundMet = cp.Documents <= cp.Bound

	if !cp.BoundMet {
		if cp.Held, err = s.held(ctx); err != nil {
			return cp, err
		}
	}
	totals, err := s.probe.RetentionTotals(ctx)
	if err != nil {
		return cp, err
	}
	cp.DeletedByStatus = map[string]int64{}
	for st, n := range totals.Deleted {
		cp.DeletedByStatus[string(st)] = n
		cp.Deleted += n
	}
	if events := s.driven.Load(); events > 0 {
		cp.CommandsPerEvent = round(float64(s.stores.commands().total())/float64(events), 2)
	}
	if cp.Costs, err = s.costs(ctx); err != nil {
		return cp, err
	}
	cp.IndexBytes = totalIndexSize(ctx, s.env.admin.Database(s.database))
	if s.cfg.soakReindex {
		t := time.Now()
		err := s.env.admin.Database(s.database).RunCommand(ctx, bson.D{{Key: "reIndex", Value: ops.ExecutionsCollection}}).Err()
		if err != nil {
			return cp, fmt.Errorf("rebuilding the indexes (-soak-reindex): %w", err)
		}
		ms := round(millis(time.Since(t)), 1)
		cp.ReindexMs = &ms
		cp.IndexBytesAfter = totalIndexSize(ctx, s.env.admin.Database(s.database))
	}
	return cp, nil
}

// expected returns, at wall time at, the live executions, the finished ones the retention
// must keep, and the finished ones it may not have deleted yet though past their retention:
// those that became deletable within lag before at (their cutoff passed, or they finished,
// then). The simulated clock's offset is taken as sampled at or before each time, at most
// what it was, so both counts err on the side of more.
func (s *soakRun) expected(at time.Time, lag time.Duration) (live, within, recent int64) {
	earlier := at.Add(-lag)
	cutoffs := s.cfg.soakRetention.Cutoffs(at.Add(s.clock.offsetAt(at)))
	cutoffsEarlier := s.cfg.soakRetention.Cutoffs(earlier.Add(s.clock.offsetAt(earlier)))
	s.mu.Lock()
	defer s.mu.Unlock()
	finished := int64(0)
	for i, status := range soakStatuses {
		stamps := s.finished[i]
		finished += int64(len(stamps))
		cutoff, kept := cutoffs[status]
		if !kept { // kept for ever
			within += int64(len(stamps))
			continue
		}
		c, ce, e := cutoff.UnixNano(), cutoffsEarlier[status].UnixNano(), earlier.UnixNano()
		for _, t := range stamps {
			switch {
			case t > c:
				within++
			case t > ce || t > e:
				recent++
			}
		}
	}
	return int64(s.created) - finished, within, recent
}

// costs measures the four calls through the measurements' own store, and explains each.
func (s *soakRun) costs(ctx context.Context) (map[string]soakCost, error) {
	all := ops.AllPartitions(s.probe.Partitions())
	now, simNow := time.Now(), s.clock.now()
	cutoffs := s.cfg.soakRetention.Cutoffs(simNow)
	running := []execstore.Status{execstore.Running}
	calls := map[string]func() (int, error){
		costOutbox: func() (int, error) {
			e, err := s.probe.PendingOutboxIn(ctx, all, 0)
			return len(e), err
		},
		costTimers: func() (int, error) {
			t, err := s.probe.DueTimersIn(ctx, all, now, 0)
			return len(t), err
		},
		costRetention: func() (int, error) {
			x, err := s.probe.ExpiredIn(ctx, all, cutoffs, soakRetentionBatch)
			return len(x), err
		},
		costList: func() (int, error) {
			p, err := s.probe.List(ctx, execstore.ListQuery{Statuses: running, Limit: soakListPage})
			return len(p.Items), err
		},
	}
	outbox, due := ops.PendingOutboxScan(all), ops.DueScan(all, now)
	finds := map[string]bson.D{
		costOutbox: {{Key: "find", Value: ops.ExecutionsCollection}, {Key: "filter", Value: outbox.Filter},
			{Key: "projection", Value: bson.D{{Key: ops.FieldOutbox, Value: 1}}}, {Key: "hint", Value: outbox.Hint}},
		costTimers: {{Key: "find", Value: ops.ExecutionsCollection}, {Key: "filter", Value: due.Filter},
			{Key: "projection", Value: bson.D{{Key: ops.FieldTimers, Value: 1}, {Key: ops.FieldTimerMin, Value: 1}, {Key: ops.FieldVersion, Value: 1}}},
			{Key: "hint", Value: due.Hint}},
		costList: {{Key: "find", Value: ops.ExecutionsCollection},
			{Key: "filter", Value: bson.D{{Key: ops.FieldStatus, Value: bson.D{{Key: "$in", Value: bson.A{string(execstore.Running)}}}}}},
			{Key: "projection", Value: bson.D{{Key: ops.FieldDefinitionID, Value: 1}, {Key: ops.FieldStatus, Value: 1},
				{Key: ops.FieldParentID, Value: 1}, {Key: ops.FieldVersion, Value: 1}}},
			{Key: "sort", Value: bson.D{{Key: "_id", Value: 1}}}, {Key: "limit", Value: soakListPage + 1}},
	}
	if due.Sort != nil {
		finds[costTimers] = append(finds[costTimers], bson.E{Key: "sort", Value: due.Sort})
	}
	if cutoffs != nil {
		expired := ops.ExpiredScan(all, cutoffs)
		find := bson.D{{Key: "find", Value: ops.ExecutionsCollection}, {Key: "filter", Value: expired.Filter},
			{Key: "projection", Value: ops.ExpiredProjection()}, {Key: "hint", Value: expired.Hint}, {Key: "limit", Value: soakRetentionBatch}}
		if expired.Sort != nil {
			find = append(find, bson.E{Key: "sort", Value: expired.Sort})
		}
		finds[costRetention] = find
	}
	out := make(map[string]soakCost, len(calls))
	for _, name := range soakCosts {
		var c soakCost
		times := make([]time.Duration, 0, soakCostReps)
		for range soakCostReps {
			t0 := time.Now()
			n, err := calls[name]()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			times = append(times, time.Since(t0))
			c.Returned = n
		}
		c.Ms = round(millis(percentile(sortedDurations(times), 50)), 2)
		if find, ok := finds[name]; ok {
			var raw bson.Raw
			err := s.env.admin.Database(s.database).RunCommand(ctx,
				bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "executionStats"}}).Decode(&raw)
			if err != nil {
				return nil, fmt.Errorf("explaining the %s: %w", name, err)
			}
			explained(raw, &c)
		}
		out[name] = c
	}
	return out, nil
}

// explained records what an explain answer says of a find: executionStats' keys and
// documents examined where the server gives them (MongoDB), and its plan: MongoDB's stages,
// DocumentDB's PostgreSQL nodes, or FerretDB 1.x's SQLite steps.
func explained(raw bson.Raw, c *soakCost) {
	if stats, ok := raw.Lookup("executionStats").DocumentOK(); ok {
		c.KeysExamined = lookupInt(stats, "totalKeysExamined")
		c.DocsExamined = lookupInt(stats, "totalDocsExamined")
	}
	if plan, ok := raw.Lookup("queryPlanner", "winningPlan").DocumentOK(); ok {
		if inner, ok := plan.Lookup("queryPlan").DocumentOK(); ok { // the slot-based engine's
			plan = inner
		}
		c.Plan = planStages(plan)
		return
	}
	if plan, ok := raw.Lookup("queryPlanner", "Plan").DocumentOK(); ok {
		c.Plan = postgresNodes(plan)
		return
	}
	if steps, ok := raw.Lookup("queryPlanner", "Plan").ArrayOK(); ok {
		var lines []string
		vals, _ := steps.Values()
		for _, v := range vals {
			if s, ok := v.StringValueOK(); ok {
				if _, detail, found := strings.Cut(s, "detail="); found {
					s = detail
				}
				lines = append(lines, s)
			}
		}
		c.Plan = "SQLite: " + strings.Join(lines, "; ")
	}
}

// postgresNodes summarizes a PostgreSQL plan (DocumentDB's explain) as its nodes depth
// first, each with the index it scans: "Limit < Sort < Bitmap Heap Scan < Bitmap Index Scan
// finished_by_partition".
func postgresNodes(plan bson.Raw) string {
	var nodes []string
	var walk func(bson.Raw)
	walk = func(n bson.Raw) {
		node, _ := n.Lookup("Node Type").StringValueOK()
		if idx, ok := n.Lookup("Index Name").StringValueOK(); ok {
			node += " " + idx
		}
		nodes = append(nodes, node)
		children, _ := n.Lookup("Plans").ArrayOK()
		vals, _ := children.Values()
		for _, v := range vals {
			if d, ok := v.DocumentOK(); ok {
				walk(d)
			}
		}
	}
	walk(plan)
	return strings.Join(nodes, " < ")
}

// held counts the finished documents by what keeps the retention from deleting them: pending
// outbox entries, a timer or its hint, dead items, or nothing (then only their retention, or
// the retention's next pass). The fields are the store's (package ops).
func (s *soakRun) held(ctx context.Context) (map[string]int64, error) {
	coll := s.env.admin.Database(s.database).Collection(ops.ExecutionsCollection)
	finished := bson.E{Key: ops.FieldStatus, Value: bson.D{{Key: "$in", Value: bson.A{string(execstore.Done), string(execstore.Failed), string(execstore.Cancelled)}}}}
	gt0 := func(f string) bson.E { return bson.E{Key: f, Value: bson.D{{Key: "$gt", Value: 0}}} }
	filters := map[string]bson.D{
		"finished":       {finished},
		"outbox_pending": {finished, gt0("outbox_n")},
		"timer_or_hint":  {finished, {Key: ops.FieldTimerMin, Value: bson.D{{Key: "$exists", Value: true}}}},
		"dead_items":     {finished, gt0("dead_n")},
	}
	out := make(map[string]int64, len(filters))
	for name, f := range filters {
		n, err := coll.CountDocuments(ctx, f)
		if err != nil {
			return nil, fmt.Errorf("counting the finished executions (%s): %w", name, err)
		}
		out[name] = n
	}
	return out, nil
}

// stalled describes a stalled soak for its error: the relay's and the sweeper's Stats, the
// backlog the store holds now, and where the goroutines wait (written to
// -out/soak-stall-goroutines.txt).
func (s *soakRun) stalled(ctx context.Context) string {
	var b strings.Builder
	fmt.Fprintf(&b, "relay %+v; sweeper %+v", s.relay.Stats(), s.sweeper.Stats())
	if parts, err := s.probe.Backlog(ctx); err != nil {
		fmt.Fprintf(&b, "; backlog: %v", err)
	} else {
		var total execstore.PartitionBacklog
		for _, p := range parts {
			total.PendingOutbox += p.PendingOutbox
			total.DueTimers += p.DueTimers
			total.Dead += p.Dead
		}
		fmt.Fprintf(&b, "; the store holds %d pending entries, %d due timers, %d dead items",
			total.PendingOutbox, total.DueTimers, total.Dead)
	}
	if err := os.MkdirAll(s.cfg.out, 0o755); err == nil {
		path := filepath.Join(s.cfg.out, "soak-stall-goroutines.txt")
		if f, err := os.Create(path); err == nil {
			_ = pprof.Lookup("goroutine").WriteTo(f, 2)
			_ = f.Close()
			fmt.Fprintf(&b, "; goroutines in %s", path)
		}
	}
	return b.String()
}
