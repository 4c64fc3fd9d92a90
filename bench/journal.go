package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/journal"
	"github.com/execstore/execstore/server"
)

// The operation-journal workload: N invocations, each run through its whole life by one of C
// callers (goroutines): claimed by the caller, checkpointed, prepared from that checkpoint,
// dispatched once and reconciled Succeeded by its receipt, on a fresh database. The run is
// timed as a whole and its server commands are counted by the journal client's command
// monitor, so invocations/s and commands per invocation come from the same run. At the end
// every invocation is read back with the journal's own Read (after the counted window) and
// checked.

// journalDesign is the one design of the workload: package journal with its defaults.
const journalDesign = "journal"

var allJournalDesigns = []string{journalDesign}

// journalRevision is the revision an invocation ends at: the claim makes it 1, and the
// checkpoint, the prepare, the dispatch and the reconcile each advance it by one.
const journalRevision = 5

// journalKeyID is the id of the run's KeyRing key, made fresh by journal.NewKey.
const journalKeyID = "bench"

// Why the journal is opened with Options.AcceptWeakDurability, as the output line says it.
const (
	journalWeakNote   = "weak durability accepted (AcceptWeakDurability): the server is a single node, so w: \"majority\" means one"
	journalStrongNote = "majority durability: the server is a replica set or a sharded cluster"
)

// journalTally is what the workload saw, by invocation index. Each index is written by the
// one caller that runs it.
type journalTally struct {
	ids        []string
	owners     []string // the caller that ran the invocation; "" when none did
	claimRev   []int64  // the revision the claim returned: 1 when it was the first claim
	claims     []int    // the claims the caller made of it
	final      []int64  // the revision of the fence the reconcile returned
	checkpoint []string // the checkpoint id the prepare named
	errs       []error
	latency    []time.Duration // one invocation's whole life, claim to reconcile
}

func newJournalTally(n int) *journalTally {
	t := &journalTally{ids: make([]string, n), owners: make([]string, n), claimRev: make([]int64, n),
		claims: make([]int, n), final: make([]int64, n), checkpoint: make([]string, n), errs: make([]error, n),
		latency: make([]time.Duration, n)}
	for i := range t.ids {
		t.ids[i] = journalID(i)
	}
	return t
}

func journalID(i int) string { return fmt.Sprintf("inv-%06d", i) }

// journalOwner names caller k.
func journalOwner(k int) string { return fmt.Sprintf("caller-%03d", k) }

// The payloads of invocation id: the checkpoint's state, the prepared operation and the
// receipt's data, distinct per invocation so that a record read back for another shows.
func journalState(id string) []byte {
	return fmt.Appendf(nil, `{"invocation":%q,"step":"before"}`, id)
}

func journalOperation(id string) []byte {
	return fmt.Appendf(nil, "POST /charges id=%s amount=42.00", id)
}

func journalReceipt(id string) []byte { return fmt.Appendf(nil, "charge ch_%s", id) }

// journalIdentity is invocation id's identity.
func journalIdentity(id string) journal.Identity {
	return journal.Identity{ID: id, Scope: "bench/payments", Digest: "sha256:" + id}
}

// journalMeasured is one run of the workload: its window and its verdicts.
type journalMeasured struct {
	concurrency int
	invocations int
	weak        bool
	wall        time.Duration
	commands    commandCounts
	latency     []time.Duration // sorted
	checks      []check
}

// journalRecord is an invocation as the journal's Read found it at the end, as the checks
// read it; err is Read's error.
type journalRecord struct {
	owner        string
	revision     int64
	state        []byte // the checkpoint's
	checkpointID string
	preparedFrom string
	attempts     int
	latest       string
	noReplay     bool
	receipts     []journal.Receipt
	err          error
}

func newJournalRecord(inv *journal.Invocation, err error) journalRecord {
	if err != nil {
		return journalRecord{err: err}
	}
	r := journalRecord{owner: inv.Owner, revision: inv.Revision, preparedFrom: inv.PreparedFrom,
		attempts: inv.Attempts, latest: inv.Latest, noReplay: inv.NoReplay, receipts: inv.Receipts}
	if inv.Checkpoint != nil {
		r.state, r.checkpointID = inv.Checkpoint.State, inv.Checkpoint.ID
	}
	return r
}

// runInvocation runs invocation i's whole life as owner, recording what it saw in t.
func runInvocation(ctx context.Context, j *journal.Journal, t *journalTally, i int, owner string) error {
	id := t.ids[i]
	t.owners[i] = owner
	t.claims[i]++
	f, err := j.Claim(ctx, journalIdentity(id), owner)
	if err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	t.claimRev[i] = f.Revision
	f, ckpt, err := j.Checkpoint(ctx, f, journal.PhaseBefore, journalState(id))
	if err != nil {
		return fmt.Errorf("checkpoint: %w", err)
	}
	t.checkpoint[i] = ckpt
	if f, err = j.Prepare(ctx, f, ckpt, journalOperation(id)); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	a, err := j.Dispatch(ctx, f)
	if err != nil {
		return fmt.Errorf("dispatch: %w", err)
	}
	if string(a.Operation) != string(journalOperation(id)) {
		return fmt.Errorf("dispatch handed out %q", a.Operation)
	}
	f, err = j.Reconcile(ctx, a.Fence, journal.Receipt{Attempt: a.N, Outcome: journal.Succeeded, Data: journalReceipt(id)})
	if err != nil {
		return fmt.Errorf("reconcile: %w", err)
	}
	t.final[i] = f.Revision
	return nil
}

// measureJournal runs the workload once on j: n invocations on conc callers, then the read
// back and the checks. An invocation's error is recorded, not fatal: the checks report it.
func (e *environment) measureJournal(ctx context.Context, j *journal.Journal, cmds *commandCounter, database string, conc, n int, weak bool) (journalMeasured, error) {
	m := journalMeasured{concurrency: conc, invocations: n, weak: weak}
	t := newJournalTally(n)
	var next atomic.Int64
	var wg sync.WaitGroup
	before := cmds.snapshot()
	t0 := time.Now()
	for k := range min(conc, n) {
		wg.Go(func() {
			owner := journalOwner(k)
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				s := time.Now()
				t.errs[i] = runInvocation(ctx, j, t, i, owner)
				t.latency[i] = time.Since(s)
			}
		})
	}
	wg.Wait()
	m.wall = time.Since(t0)
	m.commands = cmds.snapshot().since(before)
	if err := ctx.Err(); err != nil {
		return m, err
	}
	for i, d := range t.latency {
		if t.errs[i] == nil {
			m.latency = append(m.latency, d)
		}
	}
	slices.Sort(m.latency)

	stored, err := readJournal(ctx, j, t.ids)
	if err != nil {
		return m, err
	}
	docs, err := e.admin.Database(database).Collection("journal").CountDocuments(ctx, bson.D{})
	if err != nil {
		return m, fmt.Errorf("counting the records for the checks: %w", err)
	}
	m.checks = journalChecks(t, stored, int(docs))
	return m, nil
}

// readJournal reads every invocation back with the journal's Read, readers at a time; a
// Read's error is part of the record, for the checks.
func readJournal(ctx context.Context, j *journal.Journal, ids []string) (map[string]journalRecord, error) {
	const readers = 16
	out := make(map[string]journalRecord, len(ids))
	var mu sync.Mutex
	var wg sync.WaitGroup
	slots := make(chan struct{}, readers)
	for _, id := range ids {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			inv, err := j.Read(ctx, id)
			mu.Lock()
			out[id] = newJournalRecord(inv, err)
			mu.Unlock()
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading the invocations for the checks: %w", err)
	}
	return out, nil
}

// runJournal runs the journal workload at every concurrency level of cfg and returns its
// rows.
func (e *environment) runJournal(ctx context.Context, cfg config, stamp string) ([]journalResult, error) {
	var rows []journalResult
	weak, err := e.singleNode(ctx)
	if err != nil {
		return nil, err
	}
	for _, conc := range cfg.journalConcurrency {
		for _, design := range cfg.journalDesigns {
			fmt.Fprintf(os.Stderr, "bench: operation journal: %s at concurrency %d\n", design, conc)
			database := fmt.Sprintf("bench_%s_%d_journal_c%d", stamp, os.Getpid(), conc)
			m, err := e.journalRun(ctx, cfg, database, conc, weak)
			if err != nil {
				return rows, fmt.Errorf("operation journal at concurrency %d: %w", conc, err)
			}
			rows = append(rows, newJournalResult(journalResult{Workload: workloadJournal, Design: design,
				Server: e.description, RTTms: float64(cfg.rtts[0]) / float64(time.Millisecond)}, m))
		}
	}
	return rows, nil
}

// singleNode reports whether a write acknowledged with w: "majority" may be on one node
// there — a standalone server, or a replica set whose hello lists fewer than two voting,
// data-bearing members (hosts) — on which the journal needs AcceptWeakDurability; a mongos
// is not. Asked over the harness's own client, by the journal's own rule.
func (e *environment) singleNode(ctx context.Context) (bool, error) {
	var hello struct {
		SetName string   `bson:"setName"`
		Msg     string   `bson:"msg"`
		Hosts   []string `bson:"hosts"`
	}
	if err := e.admin.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return false, fmt.Errorf("asking the server what it is: %w", err)
	}
	if hello.Msg == "isdbgrid" {
		return false, nil
	}
	return hello.SetName == "" || len(hello.Hosts) < 2, nil
}

// journalRun opens a journal on a fresh database, with a KeyRing of one fresh key and its
// commands counted, measures it and tears it down.
func (e *environment) journalRun(ctx context.Context, cfg config, database string, conc int, weak bool) (m journalMeasured, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.runTimeout)
	defer cancel()
	ring, err := journal.NewKeyRing(journal.NewKey(journalKeyID))
	if err != nil {
		return m, fmt.Errorf("setup: %w", err)
	}
	cmds := newCommandCounter()
	j, err := journal.Open(ctx, e.clientURI, ring, journal.Options{
		Connection:           server.Connection{Database: database, ClientOptions: clientWithMonitor(cmds)},
		AcceptWeakDurability: weak,
	})
	if err != nil {
		return m, errors.Join(fmt.Errorf("setup: %w", err), e.tearDown(ctx, cfg, database, nil))
	}
	defer func() { err = errors.Join(err, e.tearDown(ctx, cfg, database, j.Close)) }()
	return e.measureJournal(ctx, j, cmds, database, conc, cfg.journalInvocations, weak)
}
