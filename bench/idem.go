package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/server"
)

// The idempotency-key workload: N distinct keys, each claimed once, then completed once with
// its response, then claimed again (a replay, which must find it AlreadyCompleted and return
// the stored response), by C goroutines, one phase after the other, on a fresh database.
// Each phase is timed on its own and its server commands are counted by the client's command
// monitor, so claims/s, completes/s and replays/s, and the commands per claim, complete and
// replay, come from the same run.

// Designs of the idempotency workload, in the order they run and are reported.
const (
	idemDesignStore = "idem"    // package idem, with the formulation it picks for the server
	idemDesignSeed  = "idemkit" // the seed's MongoDB backend, ported as it is (idemkit.go)
)

var allIdemDesigns = []string{idemDesignStore, idemDesignSeed}

// idemNotServed is why the seed's backend is not run on a server that refuses $$NOW in
// update pipelines (server.NowInWrites), followed by the server's refusal.
const idemNotServed = "not run here: needs $$NOW in update pipelines, which this server refuses"

// Leases and retention of the workload: long enough that nothing lapses during a run.
const (
	idemLease     = time.Minute
	idemRetention = time.Hour
	idemStatus    = 201
)

// idemBackend is one design under the idempotency workload.
type idemBackend interface {
	// claim claims key for the request with fingerprint.
	claim(ctx context.Context, key, fingerprint string) (idemClaim, error)
	// complete stores body as key's response, if key is still claimed with token.
	complete(ctx context.Context, key, token string, body []byte) (bool, error)
	// collection is where the records are, for the end-of-run read.
	collection() string
	commands() commandCounts
	close(ctx context.Context) error
}

// idemClaim is what a claim found, in package idem's outcomes.
type idemClaim struct {
	outcome idem.Outcome
	token   string // New and LeaseReclaimed only
	body    []byte // AlreadyCompleted only: the stored response body
}

// idemStoreBackend is package idem's Store.
type idemStoreBackend struct {
	store *idem.Store
	cmds  *commandCounter
}

func openIdemStore(ctx context.Context, uri, database string) (*idemStoreBackend, error) {
	b := &idemStoreBackend{cmds: newCommandCounter()}
	st, err := idem.Open(ctx, uri, idem.Options{
		Connection:   server.Connection{Database: database, ClientOptions: clientWithMonitor(b.cmds)},
		ReapInterval: -1,
	})
	if err != nil {
		return nil, err
	}
	b.store = st
	return b, nil
}

func (b *idemStoreBackend) claim(ctx context.Context, key, fingerprint string) (idemClaim, error) {
	c, err := b.store.Claim(ctx, key, fingerprint, 1, idemLease)
	if err != nil {
		return idemClaim{}, err
	}
	out := idemClaim{outcome: c.Outcome, token: c.Token}
	if c.Outcome == idem.AlreadyCompleted && c.Record != nil && c.Record.Response != nil {
		out.body = c.Record.Response.Body
	}
	return out, nil
}

func (b *idemStoreBackend) complete(ctx context.Context, key, token string, body []byte) (bool, error) {
	resp := idem.Response{Status: idemStatus, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: body}
	return b.store.Complete(ctx, key, token, resp, idemRetention)
}

func (b *idemStoreBackend) collection() string      { return "idempotency" }
func (b *idemStoreBackend) commands() commandCounts { return b.cmds.snapshot() }
func (b *idemStoreBackend) close(ctx context.Context) error {
	return b.store.Close(ctx)
}

// idemTally is what the workload saw, by key index, as the end-of-run checks read it. Each
// index is written by one goroutine per phase, and the phases run one after the other.
type idemTally struct {
	keys      []string
	tokens    [][]string // the tokens the key's claims got, in the claim and the replay phase
	completed []bool     // Complete returned true
	replays   []idemClaim
}

func newIdemTally(n int) *idemTally {
	t := &idemTally{keys: make([]string, n), tokens: make([][]string, n), completed: make([]bool, n),
		replays: make([]idemClaim, n)}
	for i := range t.keys {
		t.keys[i] = idemKey(i)
	}
	return t
}

func idemKey(i int) string { return fmt.Sprintf("key-%06d", i) }

// idemBody is the response stored for key: JSON with bytes that are not UTF-8 after it, so
// that a replay that is not byte-exact shows.
func idemBody(key string) []byte {
	return append(fmt.Appendf(nil, `{"key":%q,"status":"charged"}`, key), 0x00, 0xff, 0xfe, '\n')
}

// idemPhase is one phase's measurements.
type idemPhase struct {
	wall     time.Duration
	commands commandCounts
}

// idemMeasured is one run of the workload: its phases and its verdicts.
type idemMeasured struct {
	design      string
	concurrency int
	keys        int
	phases      map[string]idemPhase // by phase: claim, complete, replay
	checks      []check
}

// Phases of the workload, in order.
var idemPhases = []string{"claim", "complete", "replay"}

// measureIdem runs the workload once on b: the three phases, then the checks against the
// records the harness's own client reads.
func (e *environment) measureIdem(ctx context.Context, b idemBackend, design, database string, conc, n int) (idemMeasured, error) {
	m := idemMeasured{design: design, concurrency: conc, keys: n, phases: map[string]idemPhase{}}
	t := newIdemTally(n)
	ops := map[string]func(ctx context.Context, i int) error{
		"claim": func(ctx context.Context, i int) error {
			c, err := b.claim(ctx, t.keys[i], "fp-"+t.keys[i])
			if c.token != "" {
				t.tokens[i] = append(t.tokens[i], c.token)
			}
			return err
		},
		"complete": func(ctx context.Context, i int) error {
			if len(t.tokens[i]) == 0 {
				return nil // the claim check reports it
			}
			ok, err := b.complete(ctx, t.keys[i], t.tokens[i][0], idemBody(t.keys[i]))
			t.completed[i] = ok
			return err
		},
		"replay": func(ctx context.Context, i int) error {
			c, err := b.claim(ctx, t.keys[i], "fp-"+t.keys[i])
			if c.token != "" {
				t.tokens[i] = append(t.tokens[i], c.token)
			}
			t.replays[i] = c
			return err
		},
	}
	for _, name := range idemPhases {
		before := b.commands()
		wall, err := runIdemPhase(ctx, conc, n, ops[name])
		if err != nil {
			return m, fmt.Errorf("%s phase: %w", name, err)
		}
		m.phases[name] = idemPhase{wall: wall, commands: b.commands().since(before)}
	}
	stored, err := e.readIdemRecords(ctx, database, b.collection())
	if err != nil {
		return m, err
	}
	m.checks = idemChecks(t, stored)
	return m, nil
}

// runIdemPhase runs op for every key index 0…n-1 on conc goroutines and returns the wall
// time.
func runIdemPhase(ctx context.Context, conc, n int, op func(ctx context.Context, i int) error) (time.Duration, error) {
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	t0 := time.Now()
	for range min(conc, n) {
		g.Go(func() error {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return nil
				}
				if err := op(gctx, i); err != nil {
					return fmt.Errorf("%s: %w", idemKey(i), err)
				}
			}
		})
	}
	err := g.Wait()
	return time.Since(t0), err
}

// idemRecord is a stored record as the checks read it; both designs name these fields alike.
type idemRecord struct {
	state string
	body  []byte
}

// readIdemRecords reads every record of the run over the harness's own client, so that its
// commands are not counted.
func (e *environment) readIdemRecords(ctx context.Context, database, collection string) (map[string]idemRecord, error) {
	cur, err := e.admin.Database(database).Collection(collection).Find(ctx, bson.D{})
	if err != nil {
		return nil, fmt.Errorf("reading the records for the checks: %w", err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	out := map[string]idemRecord{}
	for cur.Next(ctx) {
		id, _ := cur.Current.Lookup("_id").StringValueOK()
		state, _ := cur.Current.Lookup("state").StringValueOK()
		_, body, _ := cur.Current.Lookup("response_body").BinaryOK()
		out[id] = idemRecord{state: state, body: body}
	}
	if err := cur.Err(); err != nil {
		return nil, fmt.Errorf("reading the records for the checks: %w", err)
	}
	return out, nil
}

// runIdem runs the idempotency workload for every design and concurrency level of cfg and
// returns its rows. A design the server cannot run gets a row that says so.
func (e *environment) runIdem(ctx context.Context, cfg config, stamp string) ([]idemResult, error) {
	var rows []idemResult
	refusal := ""
	if slices.Contains(cfg.idemDesigns, idemDesignSeed) {
		p, err := e.probeNowInWrites(ctx, cfg, fmt.Sprintf("bench_%s_%d_idem_probe", stamp, os.Getpid()))
		if err != nil {
			return nil, fmt.Errorf("idempotency keys: %w", err)
		}
		if !p.Served {
			refusal = idemNotServed + ": " + p.Refusal
		}
	}
	for _, conc := range cfg.idemConcurrency {
		for _, design := range cfg.idemDesigns {
			row := idemResult{Workload: workloadIdem, Design: design, Concurrency: conc, Keys: cfg.idemKeys,
				Server: e.description, RTTms: float64(cfg.rtts[0]) / float64(time.Millisecond)}
			if design == idemDesignSeed && refusal != "" {
				row.NotRun = refusal
				rows = append(rows, row)
				continue
			}
			fmt.Fprintf(os.Stderr, "bench: idempotency keys: %s at concurrency %d\n", design, conc)
			database := fmt.Sprintf("bench_%s_%d_idem_%s_c%d", stamp, os.Getpid(), databaseSafe(design), conc)
			m, err := e.idemRun(ctx, cfg, design, database, conc)
			if err != nil {
				return rows, fmt.Errorf("idempotency keys, %s at concurrency %d: %w", design, conc, err)
			}
			rows = append(rows, newIdemResult(row, m))
		}
	}
	return rows, nil
}

// idemRun opens the design's backend on a fresh database, measures it and tears it down.
func (e *environment) idemRun(ctx context.Context, cfg config, design, database string, conc int) (m idemMeasured, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.runTimeout)
	defer cancel()
	var b idemBackend
	switch design {
	case idemDesignStore:
		b, err = openIdemStore(ctx, e.clientURI, database)
	case idemDesignSeed:
		b, err = openIdemkit(ctx, e.clientURI, database)
	default:
		panic("unknown idempotency design " + design) // parseFlags admits no other name
	}
	defer func() {
		var closeRun func(context.Context) error
		if b != nil {
			closeRun = b.close
		}
		err = errors.Join(err, e.tearDown(ctx, cfg, database, closeRun))
	}()
	if err != nil {
		return m, fmt.Errorf("setup: %w", err)
	}
	return e.measureIdem(ctx, b, design, database, conc, cfg.idemKeys)
}

// probeNowInWrites asks the server whether it serves $$NOW in update pipelines, which the
// seed's backend claims with, on a collection of database, which it then drops.
func (e *environment) probeNowInWrites(ctx context.Context, cfg config, database string) (server.Probe, error) {
	db := e.admin.Database(database)
	if err := db.CreateCollection(ctx, idemkitCollection); err != nil {
		return server.Probe{}, fmt.Errorf("probing the server: %w", err)
	}
	p, err := connect.ProbeNowInWrites(ctx, db.Collection(idemkitCollection))
	return p, errors.Join(err, e.tearDown(ctx, cfg, database, nil))
}
