package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/leases"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// The simulation: relays and sweepers of several processes over one memstore and one
// memstore.Leases, in a testing/synctest bubble (virtual time), under a seeded plan of
// faults: calls answered late (up to past the lease), failed, or applied with an unknown
// outcome; processes crashed (nothing released) and restarted, stopped cleanly and
// restarted (their partitions handed over), paused past their leases after a handler's
// failure (EXECSTORE_SIM_PAUSE); a MaxAttempts of 2 to 4 per seed; handlers that fail for a
// while, for ever, for good, panic, or ignore their context; revives, re-arms and cancels;
// partitions changing hands; a relay of another partition count; marks on a board (simBoard)
// lost, late, carrying the entries or not, to holders that may no longer hold the partition.
// The history of the run is
// then checked against every promise of the package doc (simCheck).
//
//	EXECSTORE_SIM_SEEDS=N   runs seeds 1…N (default 200)
//	EXECSTORE_SIM_SEED=S    runs seed S alone (the replay a failure prints)
//	EXECSTORE_SIM_PAUSE=1   also pauses processes past their leases after a handler's failure:
//	                        two relays then deliver one item at once (see "What a lease
//	                        cannot do"); off by default, since some seeds of it still fail
func TestSimulation(t *testing.T) {
	first, n := uint64(1), uint64(200)
	if v := os.Getenv("EXECSTORE_SIM_SEEDS"); v != "" {
		var err error
		if n, err = strconv.ParseUint(v, 10, 64); err != nil || n == 0 {
			t.Fatalf("EXECSTORE_SIM_SEEDS=%q: want a positive number of seeds", v)
		}
	}
	if v := os.Getenv("EXECSTORE_SIM_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("EXECSTORE_SIM_SEED=%q: want a seed", v)
		}
		first, n = s, 1
	}
	for seed := first; seed < first+n; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			synctest.Test(t, func(t *testing.T) {
				bad, events := simulate(t, seed)
				if os.Getenv("EXECSTORE_SIM_TRACE") != "" && len(bad) > 0 {
					srcs := map[string]bool{}
					for _, b := range bad {
						for _, f := range strings.Fields(b) {
							if src, _, ok := strings.Cut(f, "/"); ok && strings.HasPrefix(src, "s") {
								srcs[src] = true
							}
						}
					}
					for _, e := range events {
						if srcs[e.source] || (e.kind == evHeld || e.kind == evGaveUp) && e.part == execstore.PartitionOf(firstKey(srcs), simParts) {
							t.Logf("%v %d %s %s part=%d att=%d err=%v local=%v", e.at.Format("05.000000"), e.kind, e.actor, e.item, e.part, e.attempts, e.err, e.local.Format("05.000000"))
						}
					}
				}
				if len(bad) > 0 {
					shown := bad[:min(len(bad), 30)]
					if len(bad) > len(shown) {
						shown = append(shown[:len(shown):len(shown)], fmt.Sprintf("… and %d more", len(bad)-len(shown)))
					}
					t.Errorf("seed %d broke %d promises; replay it with\n\tEXECSTORE_SIM_SEED=%d go test ./relay -run 'TestSimulation' -count=1 -v\n%s",
						seed, len(bad), seed, strings.Join(shown, "\n"))
				}
			})
		})
	}
}

// The simulation's settings.
const (
	simParts  = 8
	simLease  = 3 * time.Second
	simChaos  = 40 * time.Second // faults, crashes, commits
	simSettle = 60 * time.Second // no faults: everything must settle
)

// simBehaviour is what a handler does with an item, decided when it is committed.
type simBehaviour struct {
	failFirst int           // fails its first calls
	forever   bool          // fails every call: dead after MaxAttempts
	slow      time.Duration // forever: each call takes up to this long (heeding its context) before it fails
	permanent bool          // fails with ErrPermanent: dead at once
	panics    bool          // panics at its first call
	hang      time.Duration // ignores its context, returns nil after this long
	rearm     bool          // a timer's handler re-arms its own path at the same fire time, once
}

// simRun is one run of the simulation.
type simRun struct {
	t     *testing.T
	plan  *simPlan
	store *memstore.Store
	lease *memstore.Leases
	board *simBoard
	hist  *simHistory

	mu        sync.Mutex
	behaviour map[string]simBehaviour // by item key
	calls     map[string]int          // handler calls, by item key
	failures  map[string]int          // failed handler calls, by item key
	revived   map[string]bool
	rearmed   map[string]bool
	exes      map[string]*execstore.Execution
	lost      map[string]int64
	cancels   []context.CancelFunc

	// deadMu orders the failure records and the revives: what each record did to its item
	// is read from the store around it (simStore.Fail).
	deadMu sync.Mutex
}

func simulate(t *testing.T, seed uint64) ([]string, []simEvent) {
	plan := &simPlan{rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), lease: simLease}
	plan.maxAtt = 2 + plan.intn(3) // small: items that fail for ever die within a hand-over or two
	plan.batch = 16
	if plan.chance(0.5) {
		// Scans cut by their limit: they hand out entries and learn nothing, and a
		// Sweeper's confirmations wait behind earlier timers.
		plan.batch = 1 + plan.intn(4)
	}
	plan.pause = os.Getenv("EXECSTORE_SIM_PAUSE") != ""
	plan.leaseMode = simLeaseMode(seed % 8)
	if plan.leaseMode > leasesQuietMode {
		plan.leaseMode = leasesChaotic
	}
	run := &simRun{t: t, plan: plan, hist: &simHistory{},
		store:     memstore.New(memstore.Options{Partitions: simParts}),
		lease:     memstore.NewLeases(memstore.LeasesOptions{}),
		behaviour: map[string]simBehaviour{}, calls: map[string]int{}, failures: map[string]int{},
		revived: map[string]bool{}, rearmed: map[string]bool{}, exes: map[string]*execstore.Execution{}, lost: map[string]int64{}}
	defer func() { _ = run.store.Close(context.Background()) }()
	run.board = newSimBoard(plan)
	defer wake.Of(run.store).Subscribe(run.board)()

	procs := 2 + plan.intn(2)
	crashes := plan.leaseMode == leasesChaotic
	var wg sync.WaitGroup
	var odd []error
	var oddMu sync.Mutex
	chaosOver := make(chan struct{})
	for i := range procs {
		wg.Go(func() { run.process(fmt.Sprintf("p%d", i), i == 0, crashes, chaosOver) })
	}
	if plan.chance(0.3) {
		wg.Go(func() {
			err := run.odd()
			oddMu.Lock()
			odd = append(odd, err)
			oddMu.Unlock()
		})
	}
	engineDone := make(chan struct{})
	go func() { defer close(engineDone); run.engine() }()
	time.Sleep(simChaos)
	<-engineDone
	plan.setCalm()
	close(chaosOver)
	time.Sleep(simSettle)

	pending, err := run.store.PendingOutbox(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	due, err := run.store.DueTimers(context.Background(), time.Now(), 0)
	if err != nil {
		t.Fatal(err)
	}
	var dead []execstore.DeadItem
	for q := (execstore.DeadQuery{Limit: 1000}); ; {
		page, err := run.store.ListDead(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		dead = append(dead, page.Items...)
		if q.Cursor = page.NextCursor; q.Cursor == "" {
			break
		}
	}
	run.stopAll()
	wg.Wait()

	fin := simFinal{pending: pending, dueTimers: due, dead: dead, maxAtt: plan.maxAtt, oddRuns: odd,
		deadOK: func(item string) bool {
			run.mu.Lock()
			defer run.mu.Unlock()
			b := run.behaviour[item]
			return b.forever || b.permanent
		}}
	if plan.leaseMode == leasesSlow || plan.leaseMode == leasesOneLate || plan.leaseMode == leasesQuietMode {
		fin.lostLeases = run.lost
	}
	events := run.hist.all()
	return simCheck(events, fin), events
}

// process runs one process: a Relay and a Sweeper, each with the process's view of the
// servers. During the chaos it may crash (its calls cut off, nothing released), and comes
// back a while later as a new incarnation.
func (r *simRun) process(name string, local bool, crashes bool, chaosOver <-chan struct{}) {
	for incarnation := 0; ; incarnation++ {
		p := &simProc{name: name, plan: r.plan}
		relayName := fmt.Sprintf("%s/relay#%d", name, incarnation)
		sweeperName := fmt.Sprintf("%s/sweeper#%d", name, incarnation)
		st := &simStore{Store: r.store, p: p, hist: r.hist, parts: simParts, relay: relayName, sweeper: sweeperName, deadMu: &r.deadMu}
		if local { // this process's commits are handed over to its relays
			if sig := wake.Of(r.store); sig != nil {
				wake.Register(st, sig)
			}
		}
		wake.RegisterBoard(st, r.board) // every process's relays are woken by the marks
		defer wake.RegisterBoard(st, nil)
		lz := &simLeases{inner: r.lease, p: p}
		ctx, cancel := context.WithCancel(context.Background())
		r.mu.Lock()
		r.cancels = append(r.cancels, cancel)
		r.mu.Unlock()
		var wg sync.WaitGroup
		rl := relay.New(st, r.outboxHandler(relayName, p), r.options(relayName, lz))
		sw := relay.NewSweeper(st, r.timerHandler(sweeperName, p), r.options(sweeperName, lz))
		wg.Go(func() { r.runOne(ctx, relayName, rl) })
		wg.Go(func() { r.runOne(ctx, sweeperName, sw) })

		var crashAt, leaveAt <-chan time.Time
		switch {
		case crashes && r.plan.chance(0.5):
			crashAt = time.After(r.plan.upTo(simChaos))
		case r.plan.chance(0.5): // the partitions change hands: an item's failures come from several relays
			leaveAt = time.After(time.Second + r.plan.upTo(simChaos/4))
		}
		select {
		case <-chaosOver: // no more crashes: it runs until the end
			wg.Wait()
			if local {
				wake.Unregister(st)
			}
			r.noteLost(rl, relayName, sw, sweeperName)
			return
		case <-leaveAt: // it stops cleanly, handing its partitions over, and comes back
			var cw sync.WaitGroup
			cw.Go(func() { _ = rl.Close(context.Background()) })
			cw.Go(func() { _ = sw.Close(context.Background()) })
			cw.Wait()
			wg.Wait()
			cancel()
			if local {
				wake.Unregister(st)
			}
			time.Sleep(500*time.Millisecond + r.plan.upTo(2*time.Second))
			continue
		case <-crashAt:
		}
		p.crash()
		r.hist.add(simEvent{kind: evCrash, actor: relayName})
		cancel()
		wg.Wait()
		if local {
			wake.Unregister(st)
		}
		time.Sleep(time.Second + r.plan.upTo(5*time.Second))
	}
}

// noteLost records the leases the incarnations lost.
func (r *simRun) noteLost(rl *relay.Relay, relayName string, sw *relay.Sweeper, sweeperName string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lost[relayName] = rl.Stats().LeasesLost
	r.lost[sweeperName] = sw.Stats().LeasesLost
}

func (r *simRun) runOne(ctx context.Context, name string, x interface{ Run(context.Context) error }) {
	err := x.Run(ctx)
	r.hist.add(simEvent{kind: evRunEnd, actor: name, err: err})
	if err != nil && !errors.Is(err, errSimCrashed) && !errors.Is(err, context.Canceled) {
		r.t.Errorf("%s: Run returned %v", name, err)
	}
}

// stopAll ends every run.
func (r *simRun) stopAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.cancels {
		c()
	}
}

// odd runs a relay whose store counts another number of partitions, once the others have
// agreed: Run must refuse.
func (r *simRun) odd() error {
	time.Sleep(simLease + r.plan.upTo(simChaos/2))
	for wait := 0; ; wait++ { // the others agreed first
		recs, err := r.lease.List(context.Background(), leases.PartitioningKey(leases.RelayKey), 1)
		if err != nil {
			return err
		}
		if len(recs) == 1 && recs[0].State == idem.Completed {
			break
		}
		if wait == 20 { // ten seconds: no relay wrote the record that fixes the partitions
			r.t.Error("no relay completed the partitioning record within 10s of virtual time")
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	p := &simProc{name: "odd", plan: r.plan}
	st := &simStore{Store: r.store, p: p, hist: r.hist, parts: simParts / 2, deadMu: &r.deadMu}
	ctx, cancel := context.WithCancel(context.Background())
	r.mu.Lock()
	r.cancels = append(r.cancels, cancel)
	r.mu.Unlock()
	rl := relay.New(st, func(context.Context, execstore.OutboxEntry) error {
		r.t.Error("a relay of another partition count delivered")
		return nil
	}, r.options("odd/relay#0", &simLeases{inner: r.lease, p: p}))
	return rl.Run(ctx)
}

func (r *simRun) options(name string, lz relay.Leases) relay.Options {
	var logger *slog.Logger
	if os.Getenv("EXECSTORE_SIM_LOG") != "" {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("relay", name)
	}
	return relay.Options{
		Logger: logger,
		Lease:  lz, LeaseDuration: simLease, PollInterval: 500 * time.Millisecond, Lanes: 4, Batch: r.plan.batch,
		RetryMin: 50 * time.Millisecond, RetryMax: time.Second, StopTimeout: time.Second, MaxAttempts: r.plan.maxAtt,
		DeadCountInterval: -1,
		OnDead: func(ev relay.DeadEvent) {
			r.hist.add(simEvent{kind: evToldDead, actor: name, item: refKey(ev.Item), attempts: ev.Attempts.Count})
		},
		OnError: func(err error) {
			var e *relay.Error
			if errors.As(err, &e) && e.Op == relay.OpFail {
				r.hist.add(simEvent{kind: evFailErr, actor: name, err: err})
			}
		},
		OnPartition: func(ev relay.PartitionEvent) {
			k := evGaveUp
			if ev.Held {
				k = evHeld
			}
			r.hist.add(simEvent{kind: k, actor: name, part: ev.Partition, local: ev.Local})
		},
	}
}

// call is one handler call of item: it records its start and end, and does what the item's
// behaviour says.
func (r *simRun) call(ctx context.Context, actor string, p *simProc, ev simEvent) error {
	ev.kind, ev.actor = evStart, actor
	ev.part = execstore.PartitionOf(ev.source, simParts)
	r.hist.add(ev)
	r.mu.Lock()
	b := r.behaviour[ev.item]
	n := r.calls[ev.item]
	r.calls[ev.item]++
	revived := r.revived[ev.item]
	r.mu.Unlock()
	var err error
	func() {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("handler panicked: %v", v)
			}
		}()
		switch {
		case revived:
		case b.panics && n == 0:
			panic("sim: a handler's panic")
		case b.permanent:
			err = fmt.Errorf("sim: bad event: %w", relay.ErrPermanent)
		case b.forever || n < b.failFirst:
			if b.slow > 0 {
				_ = simWait(ctx, r.plan.upTo(b.slow))
			}
			err = errors.New("sim: handler failed")
		case b.hang > 0 && n == 0:
			time.Sleep(b.hang) // ignores ctx
		}
	}()
	if err == nil && p.isCrashed() {
		err = errSimCrashed // the process died before its handler returned
	}
	if err != nil {
		r.mu.Lock()
		r.failures[ev.item]++
		r.mu.Unlock()
		if b.forever && r.plan.pauses() && r.plan.chance(0.3) {
			// The process pauses past its lease before its failure record is sent: another
			// relay takes the partition over and delivers the item meanwhile, with the
			// attempts it reads, and both records reach the store.
			p.pauseFor(simLease + r.plan.upTo(simLease))
		}
	}
	ev.kind, ev.err = evEnd, err
	r.hist.add(ev)
	return err
}

func (r *simRun) outboxHandler(actor string, p *simProc) func(context.Context, execstore.OutboxEntry) error {
	return func(ctx context.Context, e execstore.OutboxEntry) error {
		return r.call(ctx, actor, p, simEvent{item: outboxKey(e.SourceID, e.Seq), source: e.SourceID, target: e.TargetID, seq: e.Seq})
	}
}

func (r *simRun) timerHandler(actor string, p *simProc) func(context.Context, execstore.DueTimer) error {
	return func(ctx context.Context, tm execstore.DueTimer) error {
		k := timerKey(tm.ExecutionID, tm.Path, tm.FireAt)
		err := r.call(ctx, actor, p, simEvent{item: k, source: tm.ExecutionID, path: tm.Path, fireAt: tm.FireAt})
		r.mu.Lock()
		again := err == nil && r.behaviour[k].rearm && !r.rearmed[k]
		r.rearmed[k] = r.rearmed[k] || again
		r.mu.Unlock()
		if again { // re-armed by its own handler, at the same fire time
			if cerr := r.commit(tm.ExecutionID, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer(tm.Path, tm.FireAt)}}, "", 0); cerr != nil {
				return cerr
			}
		}
		return err
	}
}

// engine commits entries and timer ops to the executions, and revives dead items, during
// the chaos.
func (r *simRun) engine() {
	end := time.Now().Add(simChaos - 5*time.Second)
	sources := 10
	for time.Now().Before(end) {
		time.Sleep(50*time.Millisecond + r.plan.upTo(400*time.Millisecond))
		src := fmt.Sprintf("s%d", r.plan.intn(sources))
		switch x := r.plan.intn(10); {
		case x < 6:
			_ = r.commit(src, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t-" + src, Event: []byte("e")}}}, "t-"+src, r.plan.intn(12))
		case x < 8:
			path := fmt.Sprintf("p%d", r.plan.intn(3))
			at := time.Now().Add(r.plan.upTo(4 * time.Second)).Truncate(time.Millisecond)
			_ = r.commit(src, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer(path, at)}}, "", r.plan.intn(12))
		case x < 9:
			path := fmt.Sprintf("p%d", r.plan.intn(3))
			_ = r.commit(src, execstore.Commit{Timers: []execstore.TimerOp{execstore.CancelTimer(path)}}, "", 0)
		default:
			r.reviveOne()
		}
	}
}

// behaviourOf draws an item's behaviour: mostly healthy.
func (r *simRun) behaviourOf(x int) simBehaviour {
	switch x {
	case 0:
		return simBehaviour{failFirst: 1 + r.plan.intn(r.plan.maxAtt-1)}
	case 1:
		return simBehaviour{forever: true}
	case 6:
		return simBehaviour{forever: true, slow: simLease}
	case 2:
		return simBehaviour{permanent: true}
	case 3:
		return simBehaviour{panics: true}
	case 4:
		return simBehaviour{hang: r.plan.upTo(2 * simLease)}
	case 5:
		return simBehaviour{rearm: true}
	}
	return simBehaviour{}
}

// commit commits c to execution id, reloading it when another write moved it on (a
// revive), and records what it wrote. kind draws the behaviour of what it writes.
func (r *simRun) commit(id string, c execstore.Commit, target string, kind int) error {
	ctx := context.Background()
	for {
		r.mu.Lock()
		exe := r.exes[id]
		if exe == nil {
			exe = &execstore.Execution{ID: id, DefinitionID: "sim", Status: execstore.Running}
			r.exes[id] = exe
		}
		r.mu.Unlock()
		b := r.behaviourOf(kind)
		seqs, err := r.store.Commit(ctx, exe, c)
		if errors.Is(err, execstore.ErrConflict) {
			r.hist.add(simEvent{kind: evConflict, actor: "engine", source: id, attempts: int(exe.Version)})
			fresh, lerr := r.store.Load(ctx, id)
			if lerr != nil {
				return lerr
			}
			r.mu.Lock()
			r.exes[id] = fresh
			r.mu.Unlock()
			continue
		}
		if err != nil {
			r.t.Errorf("engine commit of %s: %v", id, err)
			return err
		}
		r.mu.Lock()
		for _, seq := range seqs {
			k := outboxKey(id, seq)
			r.behaviour[k] = b
			r.hist.add(simEvent{kind: evCommit, actor: "engine", item: k, source: id, target: target, seq: seq, attempts: int(exe.Version)})
		}
		for _, op := range c.Timers {
			if !op.Cancel {
				k := timerKey(id, op.Path, op.FireAt)
				if _, ok := r.behaviour[k]; !ok || !r.rearmed[k] {
					r.behaviour[k] = b
				}
			}
			r.hist.add(simEvent{kind: evCommit, actor: "engine", source: id, path: op.Path, fireAt: op.FireAt, cancel: op.Cancel, attempts: int(exe.Version)})
		}
		r.mu.Unlock()
		return nil
	}
}

// reviveOne revives a dead item, if there is one: it succeeds from then on.
func (r *simRun) reviveOne() {
	page, err := r.store.ListDead(context.Background(), execstore.DeadQuery{Limit: 10})
	if err != nil || len(page.Items) == 0 {
		return
	}
	d := page.Items[r.plan.intn(len(page.Items))]
	k := refKey(d.ItemRef)
	r.mu.Lock()
	r.revived[k] = true
	r.mu.Unlock()
	r.deadMu.Lock()
	defer r.deadMu.Unlock()
	ok, err := r.store.Revive(context.Background(), d.ItemRef)
	if err == nil && ok {
		r.hist.add(simEvent{kind: evRevive, actor: "engine", item: k, source: d.ExecutionID})
	}
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}
