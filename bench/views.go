package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/leases"
	"github.com/execstore/execstore/journal"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
	"github.com/execstore/execstore/ui"
)

// The views run (-views N) fills one database with N executions as a store holds them a
// while into its life: mostly finished, with pending outbox entries, due and later timers,
// dead items, children under parents, idempotency records, relays' leases and journal
// invocations. Then it requests every page of the web UI, as HTML and as ?format=json (the
// command execstore's -json of the same read, byte for byte), and reports each one's time
// and the server commands it sent, counted by a command monitor on the UI's client.
const (
	viewsReps        = 5    // requests of each page; its time is their median, and their max
	viewsInsertBatch = 1000 // executions per insertMany while filling
	viewsIdemRecords = 1000
	viewsInvocations = 50
	viewsPartitions  = 64 // the relays' partitions, whose leases the fill claims
	// viewsTarget is the target: every view and command within half a second.
	viewsTarget = 500 * time.Millisecond
)

// viewsShape is one in every how many executions has each kind of work.
const (
	viewsPendingOneIn = 50  // running, with two pending outbox entries
	viewsDueOneIn     = 50  // running, with a due timer
	viewsLaterOneIn   = 50  // running, with a timer due in an hour
	viewsDeadOneIn    = 100 // running, its one outbox entry dead
	viewsChildOneIn   = 10  // a child of the execution before it
	viewsFailedOneIn  = 7   // of the finished: Failed, else Done
)

// viewResult is one page's row of the report and of bench-views.json.
type viewResult struct {
	Path     string  `json:"path"`
	Command  string  `json:"command,omitempty"` // the command execstore that prints its JSON
	Status   int     `json:"status"`
	MedianMs float64 `json:"median_ms"`
	MaxMs    float64 `json:"max_ms"`
	Commands int     `json:"commands"` // server commands one request sent
	// CommandNames are those commands by name, in the order sent.
	CommandNames []string `json:"command_names"`
	Bytes        int      `json:"bytes"`
	WithinTarget bool     `json:"within_target"` // max ≤ 0.5 s
}

// viewsReport is bench-views.json.
type viewsReport struct {
	Server     string       `json:"server"`
	Executions int          `json:"executions"`
	FillS      float64      `json:"fill_s"`
	WarmUpS    float64      `json:"warm_up_s"` // every page requested once, unmeasured, after the fill
	Reps       int          `json:"reps"`
	Views      []viewResult `json:"views"`
}

// views runs the views measurement; its status is 1 when a page answered with an error or
// past the target.
func views(ctx context.Context, cfg config) (status int, err error) {
	cfg.rtts = []time.Duration{0}
	cfg.variants = []string{variantBatch} // a server is needed
	env, err := startEnvironment(ctx, cfg)
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, env.close()) }()
	database := fmt.Sprintf("bench_%s_%d_views", time.Now().UTC().Format("20060102_150405"), os.Getpid())
	defer func() { err = errors.Join(err, env.tearDown(ctx, cfg, database, nil)) }()

	fmt.Fprintf(os.Stderr, "bench: views: filling %s with %d executions\n", database, cfg.viewsExecutions)
	started := time.Now()
	ids, err := fillViews(ctx, env.uri, database, cfg.viewsExecutions)
	if err != nil {
		return 1, err
	}
	report := viewsReport{Server: env.description, Executions: cfg.viewsExecutions,
		FillS: round(time.Since(started).Seconds(), 1), Reps: viewsReps}
	fmt.Fprintf(os.Stderr, "bench: views: filled in %.1f s\n", report.FillS)

	var mu sync.Mutex
	var sent []string
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		mu.Lock()
		sent = append(sent, e.CommandName)
		mu.Unlock()
	}}
	client, err := mongo.Connect(options.Client().ApplyURI(env.uri).SetMonitor(monitor))
	if err != nil {
		return 1, err
	}
	defer func() { err = errors.Join(err, client.Disconnect(context.WithoutCancel(ctx))) }()
	h := ui.Handler(ui.Options{Database: client.Database(database)})

	// Every page once, unmeasured, before any is measured: the first reads of a collection
	// just loaded set its rows' hint bits, and the server vacuums and analyzes it meanwhile,
	// which a store that grew to this size over time has long done.
	warm := time.Now()
	for _, page := range viewsPages(ids) {
		if err := ctx.Err(); err != nil {
			return 1, err
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, page.path, nil))
		if rec.Code != http.StatusOK {
			return 1, fmt.Errorf("views: %s answered %d before it was measured: %s", page.path, rec.Code, rec.Body)
		}
	}
	report.WarmUpS = round(time.Since(warm).Seconds(), 1)

	for _, page := range viewsPages(ids) {
		for _, format := range []string{"", "json"} {
			r := viewResult{Path: page.path}
			path := page.path
			if format == "json" {
				r.Command = page.command
				sep := "?"
				if strings.Contains(path, "?") {
					sep = "&"
				}
				path += sep + "format=json"
				r.Path = path
			}
			times := make([]time.Duration, 0, viewsReps)
			for range viewsReps {
				if err := ctx.Err(); err != nil {
					return 1, err
				}
				mu.Lock()
				sent = nil
				mu.Unlock()
				req := httptest.NewRequestWithContext(ctx, http.MethodGet, path, nil)
				rec := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(rec, req)
				times = append(times, time.Since(t0))
				body, _ := io.ReadAll(rec.Result().Body)
				mu.Lock()
				r.CommandNames = append([]string(nil), sent...)
				mu.Unlock()
				r.Status, r.Bytes = rec.Code, len(body)
			}
			slices.Sort(times)
			r.Commands = len(r.CommandNames)
			r.MedianMs = round(millis(times[len(times)/2]), 1)
			r.MaxMs = round(millis(times[len(times)-1]), 1)
			r.WithinTarget = times[len(times)-1] <= viewsTarget
			if r.Status != http.StatusOK || !r.WithinTarget {
				status = 1
			}
			report.Views = append(report.Views, r)
		}
	}
	return status, report.write(cfg)
}

// viewsPage is one page requested, and the command whose -json its ?format=json is.
type viewsPage struct{ path, command string }

// viewsPages are the pages the views run requests, over the fill's ids.
func viewsPages(ids viewsIDs) []viewsPage {
	return []viewsPage{
		{"/", ""},
		{"/executions", "list"},
		{"/executions?status=FAILED", "list -status FAILED"},
		{"/executions?status=RUNNING", "list -status RUNNING"},
		{"/executions?definition=def-3", "list -definition def-3"},
		{"/executions?parent=" + ids.parent, "list -parent " + ids.parent},
		{"/executions?roots=1", "list -roots"},
		{"/executions?after=" + ids.middle, "list -after " + ids.middle},
		{"/executions?sort=updated&order=desc", "list -sort updated -desc"},
		{"/executions?sort=created", "list -sort created"},
		{"/executions?status=RUNNING&sort=updated&order=desc", "list -status RUNNING -sort updated -desc"},
		{"/executions/" + ids.pending, "show " + ids.pending},
		{"/executions/" + ids.parent, "show " + ids.parent},
		{"/outbox", "outbox"},
		{"/timers", "timers"},
		{"/dead", "dead"},
		{"/dead?kind=outbox", "dead -kind outbox"},
		{"/dead?definition=def-3", "dead -definition def-3"},
		{"/dead?error=503&older-than=1s", "dead -error 503 -older-than 1s"},
		{"/backlog", "backlog"},
		{"/relays", "relays"},
		{"/idem?key=" + ids.idemKey, "idem get " + ids.idemKey},
		{"/idem?prefix=req-", "idem list req-"},
		{"/journal?id=" + ids.invocation, "journal show " + ids.invocation},
		{"/journal", "journal retention"},
		{"/journal?state=pending", "journal list -state pending"},
	}
}

// viewsIDs are ids of the fill that pages name.
type viewsIDs struct {
	pending, parent, middle, idemKey, invocation string
}

// fillViews fills database with n executions, the idempotency records, the leases and the
// journal invocations, through the stores' own documents: the executions as their commits
// write them (one insertMany a batch), the dead items by the store's Fail, the rest by their
// stores' calls.
func fillViews(ctx context.Context, uri, database string, n int) (viewsIDs, error) {
	ids := viewsIDs{pending: viewsID(0), parent: viewsID(3 * viewsChildOneIn), middle: viewsID(n / 2),
		idemKey: "req-000500", invocation: "pay-0025"}
	store, err := aio.Open(ctx, uri, aio.Options{Connection: server.Connection{Database: database}})
	if err != nil {
		return ids, err
	}
	defer store.Close(context.WithoutCancel(ctx))
	client, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return ids, err
	}
	defer client.Disconnect(context.WithoutCancel(ctx))
	coll := client.Database(database).Collection(ops.ExecutionsCollection)
	layout := ops.Layout{Profile: store.Server().Profile, TraceMax: 200, Partitions: store.Partitions()}
	var batch []any
	var dead []execstore.ItemRef
	for i := range n {
		exe, c := viewsExecution(i)
		plan, err := ops.BuildCommit(layout, exe, &c, ops.Seqs{Outbox: []int64{int64(2*i + 1), int64(2*i + 2)}, At: ops.CommitTime()})
		if err != nil {
			return ids, fmt.Errorf("building execution %s: %w", exe.ID, err)
		}
		batch = append(batch, plan.Insert)
		if i%viewsDeadOneIn == 3 {
			dead = append(dead, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: exe.ID, Seq: int64(2*i + 1)})
		}
		if len(batch) == viewsInsertBatch || i == n-1 {
			if _, err := coll.InsertMany(ctx, batch); err != nil {
				return ids, fmt.Errorf("inserting the executions: %w", err)
			}
			batch = batch[:0]
		}
	}
	for _, ref := range dead {
		if _, ok, err := store.Fail(ctx, ref, execstore.Failure{Error: "downstream: 503 Service Unavailable", At: time.Now(), Dead: true}); err != nil || !ok {
			return ids, fmt.Errorf("moving %s's entry to dead: %v (moved: %v)", ref.ExecutionID, err, ok)
		}
	}
	// The last hour's rate samples of two relays and two sweepers, as they record them.
	now := time.Now()
	for _, member := range []string{"relay/a", "relay/b", "sweeper/a", "sweeper/b"} {
		component, name, _ := strings.Cut(member, "/")
		var total execstore.RateTotals
		for m := 59; m >= 0; m-- {
			rec := execstore.RateRecord{Component: component, Member: name, At: now.Add(-time.Duration(m) * time.Minute), From: total}
			total.Delivered += int64(100 + m)
			rec.To = total
			if err := store.RecordRates(ctx, rec); err != nil {
				return ids, err
			}
		}
	}
	return ids, errors.Join(fillIdem(ctx, uri, database), fillJournal(ctx, uri, database))
}

func viewsID(i int) string { return fmt.Sprintf("exe-%07d", i) }

// viewsExecution is the fill's execution i and the commit that creates it.
func viewsExecution(i int) (*execstore.Execution, execstore.Commit) {
	exe := &execstore.Execution{ID: viewsID(i), DefinitionID: fmt.Sprintf("def-%d", i%10), Status: execstore.Running,
		Data: []byte(`{"step":3,"customer":"c-` + fmt.Sprint(i%977) + `"}`)}
	if i%viewsChildOneIn == 1 && i > 0 {
		exe.ParentID = viewsID(i - 1)
	}
	var c execstore.Commit
	now := time.Now()
	switch {
	case i%viewsPendingOneIn == 0:
		c.Emits = []execstore.Emit{{TargetID: "billing", Event: []byte("charge")}, {TargetID: "audit", Event: []byte("log")}}
	case i%viewsDueOneIn == 1:
		c.Timers = []execstore.TimerOp{execstore.ScheduleTimer("Paid.Reminder", now.Add(-time.Minute))}
	case i%viewsLaterOneIn == 2:
		c.Timers = []execstore.TimerOp{execstore.ScheduleTimer("Paid.Expiry", now.Add(time.Hour))}
	case i%viewsDeadOneIn == 3:
		c.Emits = []execstore.Emit{{TargetID: "audit", Event: []byte("log")}}
	case i%viewsFailedOneIn == 0:
		exe.Status = execstore.Failed
	default:
		exe.Status = execstore.Done
	}
	return exe, c
}

// fillIdem claims idempotency records (every other one completed), and the leases of a
// relay holding every partition.
func fillIdem(ctx context.Context, uri, database string) error {
	s, err := idem.Open(ctx, uri, idem.Options{Connection: server.Connection{Database: database}, ReapInterval: -1})
	if err != nil {
		return err
	}
	defer s.Close(context.WithoutCancel(ctx))
	for i := range viewsIdemRecords {
		key := fmt.Sprintf("req-%06d", i)
		c, err := s.Claim(ctx, key, "fp-"+key, 1, time.Hour)
		if err != nil {
			return err
		}
		if i%2 == 0 {
			if _, err := s.Complete(ctx, key, c.Token, idem.Response{Status: http.StatusCreated, Body: []byte(`{"ok":true}`)}, 24*time.Hour); err != nil {
				return err
			}
		}
	}
	const member = "relay-views-1"
	if _, err := s.ClaimAs(ctx, leases.MemberKey(leases.RelayKey, member), leases.MemberFingerprint(viewsPartitions), 1, time.Hour, member); err != nil {
		return err
	}
	for p := range viewsPartitions {
		if _, err := s.ClaimAs(ctx, leases.PartitionKey(leases.RelayKey, p), leases.Fingerprint, 1, time.Hour, member); err != nil {
			return err
		}
	}
	return nil
}

// fillJournal runs invocations to their receipts.
func fillJournal(ctx context.Context, uri, database string) error {
	ring, err := journal.NewKeyRing(journal.NewKey("k1"))
	if err != nil {
		return err
	}
	j, err := journal.Open(ctx, uri, ring, journal.Options{AcceptWeakDurability: true, Connection: server.Connection{Database: database}})
	if err != nil {
		return err
	}
	defer j.Close(context.WithoutCancel(ctx))
	for i := range viewsInvocations {
		f, err := j.Claim(ctx, journal.Identity{ID: fmt.Sprintf("pay-%04d", i), Scope: "shop/payments", Digest: "sha256:00"}, "worker-a")
		if err != nil {
			return err
		}
		f, ckpt, err := j.Checkpoint(ctx, f, journal.PhaseBefore, []byte("state"))
		if err != nil {
			return err
		}
		if f, err = j.Prepare(ctx, f, ckpt, []byte("operation")); err != nil {
			return err
		}
		a, err := j.Dispatch(ctx, f)
		if err != nil {
			return err
		}
		if _, err := j.Reconcile(ctx, a.Fence, journal.Receipt{Attempt: a.N, Outcome: journal.Succeeded}); err != nil {
			return err
		}
	}
	return nil
}

// write prints the report's table and writes bench-views.json under -out.
func (r viewsReport) write(cfg config) error {
	out := os.Stdout
	fmt.Fprintf(out, "views: %d executions on %s (filled in %.1f s); every page once unmeasured (%.1f s), then each %d times, median and max\n",
		r.Executions, r.Server, r.FillS, r.WarmUpS, r.Reps)
	fmt.Fprintf(out, "%-44s %-34s %6s %9s %9s %5s  %s\n", "PAGE", "COMMAND (its -json)", "STATUS", "MEDIAN", "MAX", "CMDS", "SENT")
	for _, v := range r.Views {
		mark := ""
		if !v.WithinTarget {
			mark = "  > 0.5 s"
		}
		fmt.Fprintf(out, "%-44s %-34s %6d %7.1fms %7.1fms %5d  %s%s\n", v.Path, v.Command, v.Status, v.MedianMs, v.MaxMs,
			v.Commands, strings.Join(v.CommandNames, ","), mark)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(cfg.out, "bench-views.json"), append(b, '\n'), 0o644)
}
