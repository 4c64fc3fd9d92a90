package relay_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// errSimFault is the failure a simulated call answers with when the plan fails it.
var errSimFault = errors.New("sim: call failed by the fault plan")

// errSimCrashed is what every call of a crashed process answers: nothing it sends arrives.
var errSimCrashed = errors.New("sim: process crashed")

// simFault is what the plan does to one call.
type simFault int

const (
	faultNone    simFault = iota
	faultLate             // answered late: applied, then the answer waits
	faultSlow             // sent late: waits, then applied
	faultFailed           // not applied, answered with an error
	faultUnknown          // applied, answered with an error: the caller cannot tell
)

// simLeaseMode is the lease server's behaviour for a whole seed.
type simLeaseMode int

const (
	leasesChaotic   simLeaseMode = iota // late (up to past the lease), failed and unknown calls
	leasesSlow                          // every call answered at 45% of the lease, nothing else
	leasesOneLate                       // one renewal answered at 62% of the lease, nothing else
	leasesQuietMode                     // no fault
)

// simPlan draws every fault of a seed. Its random source is shared by the actors of the
// bubble, under a lock: the seed decides the plan, the runtime's scheduling the order in
// which actors draw from it.
type simPlan struct {
	mu        sync.Mutex
	rng       *rand.Rand
	calm      bool // faults off: the end of a run, when everything must settle
	lease     time.Duration
	leaseMode simLeaseMode
	oneLate   bool // leasesOneLate: the late renewal was drawn
	maxAtt    int  // the relays' MaxAttempts
	batch     int  // the relays' and sweepers' Batch
	pause     bool // EXECSTORE_SIM_PAUSE: processes may pause past their leases
}

func (p *simPlan) intn(n int) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.IntN(n)
}

func (p *simPlan) chance(f float64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64() < f
}

// upTo is a duration in [0, d).
func (p *simPlan) upTo(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Duration(p.rng.Int64N(int64(d)))
}

// pauses reports whether a process may pause now: past its leases, so only when the plan
// promises no lease kept.
func (p *simPlan) pauses() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pause && !p.calm && p.leaseMode == leasesChaotic
}

// faulty reports whether faults are still drawn: not once the run is calm.
func (p *simPlan) faulty() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.calm
}

func (p *simPlan) setCalm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calm = true
}

// storeFault draws the fault of one execution store call; write says whether the call
// writes (only a write has an unknown outcome).
func (p *simPlan) storeFault(write bool) (simFault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calm {
		return faultNone, 0
	}
	switch x := p.rng.Float64(); {
	case x < 0.05:
		return faultLate, time.Duration(p.rng.Int64N(int64(2 * time.Second)))
	case x < 0.10:
		return faultSlow, time.Duration(p.rng.Int64N(int64(2 * time.Second)))
	case x < 0.13:
		return faultFailed, 0
	case x < 0.16 && write:
		return faultUnknown, 0
	}
	return faultNone, 0
}

// leaseFault draws the fault of one lease store call.
func (p *simPlan) leaseFault(renewal bool) (simFault, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.calm {
		return faultNone, 0
	}
	switch p.leaseMode {
	case leasesQuietMode:
		return faultNone, 0
	case leasesSlow:
		return faultLate, p.lease * 45 / 100
	case leasesOneLate:
		if renewal && !p.oneLate && p.rng.IntN(8) == 0 {
			p.oneLate = true
			return faultLate, p.lease * 62 / 100
		}
		return faultNone, 0
	}
	switch x := p.rng.Float64(); {
	case x < 0.04:
		return faultLate, time.Duration(p.rng.Int64N(int64(p.lease * 3 / 2))) // up to past the lease
	case x < 0.08:
		return faultSlow, time.Duration(p.rng.Int64N(int64(p.lease)))
	case x < 0.11:
		return faultFailed, 0
	case x < 0.13:
		return faultUnknown, 0
	}
	return faultNone, 0
}

// simProc is one process of the simulation: its view of the servers, which the plan
// slows and fails, and which a crash cuts off.
type simProc struct {
	name    string
	plan    *simPlan
	mu      sync.Mutex
	crashed bool
	paused  time.Time // until then, nothing it sends arrives: it is sent then (a process paused, or cut off)
}

// pauseFor holds every call the process sends for d from now.
func (p *simProc) pauseFor(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.paused = time.Now().Add(d)
}

func (p *simProc) pausedFor() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	return time.Until(p.paused)
}

func (p *simProc) isCrashed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.crashed
}

func (p *simProc) crash() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.crashed = true
}

// simWait waits d, or until ctx ends.
func simWait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// call runs apply under fault f: it is what the process's caller sees of the call.
func simCall[R any](ctx context.Context, p *simProc, f simFault, d time.Duration, apply func() (R, error)) (R, error) {
	var zero R
	if p.isCrashed() {
		return zero, errSimCrashed
	}
	if d := p.pausedFor(); d > 0 {
		if err := simWait(ctx, d); err != nil {
			return zero, err
		}
		if p.isCrashed() {
			return zero, errSimCrashed
		}
	}
	switch f {
	case faultFailed:
		return zero, errSimFault
	case faultSlow:
		if err := simWait(ctx, d); err != nil {
			return zero, err
		}
		if p.isCrashed() {
			return zero, errSimCrashed
		}
	}
	res, err := apply()
	switch f {
	case faultUnknown:
		if err == nil {
			return zero, &execstore.OutcomeUnknownError{Op: "sim", ExecutionID: "sim", Err: errSimFault}
		}
	case faultLate:
		if werr := simWait(ctx, d); werr != nil {
			if err == nil {
				return zero, &execstore.OutcomeUnknownError{Op: "sim", ExecutionID: "sim", Err: werr}
			}
			return zero, werr
		}
	}
	return res, err
}

// simStore is a process's execution store: memstore, slowed and failed by the plan, with
// the writes that took effect recorded in the history.
type simStore struct {
	*memstore.Store
	p       *simProc
	hist    *simHistory
	parts   int         // the partitions it says it has: another number than the store's for a relay that must be refused
	relay   string      // the relay incarnation whose acks go through it
	sweeper string      // the sweeper incarnation whose timers' failures go through it
	deadMu  *sync.Mutex // the run's: failure records and revives, one at a time, so each record's effect is known

	spinMu sync.Mutex
	spinAt time.Time
	spinN  int
}

func (s *simStore) Partitions() int { return s.parts }

func (s *simStore) PendingOutboxIn(ctx context.Context, parts []int, limit int) ([]execstore.OutboxEntry, error) {
	s.spin("PendingOutboxIn", parts, limit)
	f, d := s.p.plan.storeFault(false)
	return simCall(ctx, s.p, f, d, func() ([]execstore.OutboxEntry, error) { return s.Store.PendingOutboxIn(ctx, parts, limit) })
}

func (s *simStore) PendingOutboxOf(ctx context.Context, ids []string, limit int) ([]execstore.OutboxEntry, error) {
	s.spin("PendingOutboxOf", ids, limit)
	f, d := s.p.plan.storeFault(false)
	return simCall(ctx, s.p, f, d, func() ([]execstore.OutboxEntry, error) { return s.Store.PendingOutboxOf(ctx, ids, limit) })
}

func (s *simStore) PendingOutboxExcept(ctx context.Context, parts []int, except []string, limit int) ([]execstore.OutboxEntry, error) {
	s.spin("PendingOutboxExcept", parts, limit)
	f, d := s.p.plan.storeFault(false)
	return simCall(ctx, s.p, f, d, func() ([]execstore.OutboxEntry, error) {
		return s.Store.PendingOutboxExcept(ctx, parts, except, limit)
	})
}

func (s *simStore) DueTimersIn(ctx context.Context, parts []int, now time.Time, limit int) ([]execstore.DueTimer, error) {
	s.spin("DueTimersIn", parts, limit)
	f, d := s.p.plan.storeFault(false)
	return simCall(ctx, s.p, f, d, func() ([]execstore.DueTimer, error) { return s.Store.DueTimersIn(ctx, parts, now, limit) })
}

func (s *simStore) DueTimersOf(ctx context.Context, ids []string, now time.Time, limit int) ([]execstore.DueTimer, error) {
	s.spin("DueTimersOf", ids, limit)
	f, d := s.p.plan.storeFault(false)
	return simCall(ctx, s.p, f, d, func() ([]execstore.DueTimer, error) { return s.Store.DueTimersOf(ctx, ids, now, limit) })
}

func (s *simStore) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	f, d := s.p.plan.storeFault(true)
	_, err := simCall(ctx, s.p, f, d, func() (struct{}, error) {
		err := s.Store.AckOutbox(ctx, sourceID, seq)
		if err == nil {
			s.hist.add(simEvent{kind: evAck, actor: s.relay, item: outboxKey(sourceID, seq), source: sourceID})
		}
		return struct{}{}, err
	})
	return err
}

func (s *simStore) DeleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	f, d := s.p.plan.storeFault(true)
	_, err := simCall(ctx, s.p, f, d, func() (struct{}, error) { return struct{}{}, s.Store.DeleteTimers(ctx, timers) })
	return err
}

func (s *simStore) Fail(ctx context.Context, ref execstore.ItemRef, fl execstore.Failure) (execstore.Attempts, bool, error) {
	f, d := s.p.plan.storeFault(true)
	type res struct {
		a  execstore.Attempts
		ok bool
	}
	actor := s.actorOf(ref.Kind)
	moved := false
	r, err := simCall(ctx, s.p, f, d, func() (res, error) {
		// What the write did is read from the store, not from the failure: under deadMu,
		// which the revives take too, the item's dead record before and after it tells
		// whether this write moved the item to dead.
		s.deadMu.Lock()
		defer s.deadMu.Unlock()
		before, wasDead := s.deadItem(ref)
		a, ok, err := s.Store.Fail(ctx, ref, fl)
		if err == nil && ok {
			after, isDead := s.deadItem(ref)
			moved = isDead && (!wasDead || !sameAttempts(before.Attempts, after.Attempts))
			ev := simEvent{kind: evFailed, actor: actor, item: refKey(ref), attempts: a.Count, source: ref.ExecutionID,
				permanent: strings.Contains(fl.Error, relay.ErrPermanent.Error())}
			if moved {
				ev.kind = evDead
			}
			s.hist.add(ev)
		}
		return res{a, ok}, err
	})
	s.hist.add(simEvent{kind: evFailCall, actor: actor, item: refKey(ref), source: ref.ExecutionID, err: err, attempts: int(f), moved: moved})
	return r.a, r.ok, err
}

// actorOf names the relay incarnation of this process that handles items of kind k.
func (s *simStore) actorOf(k execstore.ItemKind) string {
	if k == execstore.TimerItem && s.sweeper != "" {
		return s.sweeper
	}
	return s.relay
}

// deadItem reads ref's dead record from the store, unfaulted.
func (s *simStore) deadItem(ref execstore.ItemRef) (execstore.DeadItem, bool) {
	q := execstore.DeadQuery{Kinds: []execstore.ItemKind{ref.Kind}, ExecutionID: ref.ExecutionID, Limit: 1000}
	for {
		page, err := s.Store.ListDead(context.Background(), q)
		if err != nil {
			panic(fmt.Sprintf("sim: reading the dead items of %s: %v", ref.ExecutionID, err))
		}
		for _, d := range page.Items {
			if refKey(d.ItemRef) == refKey(ref) {
				return d, true
			}
		}
		if q.Cursor = page.NextCursor; q.Cursor == "" {
			return execstore.DeadItem{}, false
		}
	}
}

func sameAttempts(a, b execstore.Attempts) bool {
	return a.Count == b.Count && a.LastError == b.LastError && a.LastAt.Equal(b.LastAt)
}

func (s *simStore) ListDead(ctx context.Context, q execstore.DeadQuery) (execstore.DeadPage, error) {
	f, d := s.p.plan.storeFault(false)
	page, err := simCall(ctx, s.p, f, d, func() (execstore.DeadPage, error) { return s.Store.ListDead(ctx, q) })
	if err != nil {
		actor := s.relay
		if len(q.Kinds) == 1 {
			actor = s.actorOf(q.Kinds[0])
		}
		s.hist.add(simEvent{kind: evListDeadFail, actor: actor, source: q.ExecutionID, err: err})
	}
	return page, err
}

// simLeases is a process's lease store: memstore.Leases, slowed and failed by the plan.
type simLeases struct {
	inner *memstore.Leases
	p     *simProc
}

func (l *simLeases) ClaimAs(ctx context.Context, key, fingerprint string, version int, lease time.Duration, holder string) (idem.Claim, error) {
	f, d := l.p.plan.leaseFault(false)
	return simCall(ctx, l.p, f, d, func() (idem.Claim, error) {
		return l.inner.ClaimAs(ctx, key, fingerprint, version, lease, holder)
	})
}

func (l *simLeases) Complete(ctx context.Context, key, token string, resp idem.Response, retention time.Duration) (bool, error) {
	f, d := l.p.plan.leaseFault(false)
	return simCall(ctx, l.p, f, d, func() (bool, error) { return l.inner.Complete(ctx, key, token, resp, retention) })
}

func (l *simLeases) RenewAll(ctx context.Context, claims []idem.Held, lease time.Duration) ([]bool, error) {
	f, d := l.p.plan.leaseFault(true)
	return simCall(ctx, l.p, f, d, func() ([]bool, error) { return l.inner.RenewAll(ctx, claims, lease) })
}

func (l *simLeases) Release(ctx context.Context, key, token string) (bool, error) {
	f, d := l.p.plan.leaseFault(false)
	return simCall(ctx, l.p, f, d, func() (bool, error) { return l.inner.Release(ctx, key, token) })
}

func (l *simLeases) List(ctx context.Context, prefix string, limit int) ([]idem.Record, error) {
	f, d := l.p.plan.leaseFault(false)
	if f == faultUnknown {
		f = faultFailed // a read has no unknown outcome
	}
	return simCall(ctx, l.p, f, d, func() ([]idem.Record, error) { return l.inner.List(ctx, prefix, limit) })
}

// spin catches a relay that reads without time passing: a loop that would keep a server busy.
func (s *simStore) spin(what string, args any, limit int) {
	s.spinMu.Lock()
	defer s.spinMu.Unlock()
	if now := time.Now(); !now.Equal(s.spinAt) {
		s.spinAt, s.spinN = now, 0
	}
	s.spinN++
	if s.spinN == 1000 { // the process is cut off, so that time passes, and the seed fails
		s.hist.add(simEvent{kind: evSpin, actor: s.relay, err: fmt.Errorf("%s's process sent 1000 reads at %v without time passing, a loop that would keep a server busy; last %s(%v, %d)",
			s.relay, s.spinAt, what, args, limit)})
		s.p.crash()
	}
}
