package relay

import (
	"context"
	"hash/maphash"
	"sort"
	"sync"
	"time"
)

// session is one Run's delivery machinery: the dispatcher (pump.go) scans the partitions
// held and routes items to lanes (lanes.go), whose handlers' successes the settler acks
// (settle.go), all under one lock over the ledger (ledger.go), the holds (hold.go) and the
// executions' retries (retry.go). The partitions' leases are claimed, renewed, handed over
// and released beside them (partitions.go). Commits through a store of this process hand
// their items over (handoff.go).
//
// A session ends when the run is asked to stop (Close, the end of Run's context) or on a
// fatal failure (its context is cancelled with the cause). Then, in this order: no item is
// handed out any more (queued ones are released, pending in the store); the handlers in
// flight are waited for; what they finished is acked, within Options.StopTimeout; and only
// then are the leases no longer renewed and released, so that another relay does not take a
// partition over while a handler of this session runs (unless its lease is lost).
type session[T any, K comparable] struct {
	r *runner[T, K]
	// ctx is the run's: scans and the leases' calls get it. It is cancelled with the cause of
	// the run's end: a fatal *Error, or the run's context's end.
	ctx    context.Context
	end    context.CancelCauseFunc
	parent context.Context // ctx's parent: the run's
	// settleCtx is the acks'. It outlives ctx: an ack after the handler returned nil is
	// always right, lease or no lease. It ends StopTimeout after the lanes stopped, or when
	// Close's context ends.
	settleCtx    context.Context
	cancelSettle context.CancelFunc

	mu         sync.Mutex
	ledger     ledger[K]
	retries    retries
	lanes      []lane[T]
	holds      map[int]*hold  // the partitions held now
	member     *lease         // the relay's registration, nil until it is claimed
	committing map[string]int // commits in flight through this process, by execution (handoff.go)
	// ackedDuring holds, for each execution with a commit in flight, the items of it whose
	// ack completed meanwhile: its hand-over must not hand them out again.
	ackedDuring map[string]map[K]bool
	soon        []T  // taken, waiting for their fire time (a Sweeper's), earliest first
	heldBack    int  // items the last scan held back for their execution's retry
	stopping    bool // no more deliveries: lanes release what they pop
	settleQ     []T  // handled, awaiting their ack
	lanesDone   bool // every lane goroutine has returned: the settler flushes and returns

	laneWG, settleWG sync.WaitGroup
	settleWake       chan struct{} // cap 1: settleQ grew, or lanesDone
	progress         chan struct{} // cap 1: items left flight; the dispatcher may have room
	rescan           chan struct{} // cap 1: a scan is owed (a partition taken, a commit not handed over)
	drained          chan struct{} // cap 1: a draining hold has nothing in flight any more
	soonChanged      chan struct{} // cap 1: the earliest fire time waiting may have changed
}

func newSession[T any, K comparable](r *runner[T, K], parent, settleBase context.Context) *session[T, K] {
	s := &session[T, K]{r: r, ledger: newLedger[K](),
		retries: newRetries(r.opts.RetryMin, r.opts.RetryMax), lanes: make([]lane[T], r.opts.Lanes),
		holds: map[int]*hold{}, committing: map[string]int{}, ackedDuring: map[string]map[K]bool{},
		settleWake: make(chan struct{}, 1), progress: make(chan struct{}, 1), rescan: make(chan struct{}, 1),
		drained: make(chan struct{}, 1), soonChanged: make(chan struct{}, 1)}
	s.ctx, s.end = context.WithCancelCause(parent)
	s.parent = parent
	s.settleCtx, s.cancelSettle = context.WithCancel(settleBase)
	return s
}

// run runs the session until stop is closed or it ends, then shuts it down (see the type's
// doc). It returns the cause of its end, nil when it was stopped.
func (s *session[T, K]) run(stop <-chan struct{}) error {
	if sig := s.r.signal; sig != nil {
		unsubscribe := sig.Subscribe(s)
		defer unsubscribe()
	}
	if s.r.lease.store == nil { // every partition, for the whole run: scanned at the start
		s.mu.Lock()
		for p := range s.r.parts {
			s.addHold(p, nil)
		}
		s.mu.Unlock()
	}
	manageCtx, stopManaging := context.WithCancel(s.ctx)
	var manager sync.WaitGroup
	manager.Go(func() { s.manage(manageCtx) })
	s.settleWG.Go(s.settleLoop)

	s.dispatch(stop)

	s.mu.Lock()
	s.stopping = true
	now := time.Now()
	for _, h := range s.holds {
		h.stop(now)
	}
	for _, item := range s.soon {
		s.release(item)
	}
	s.soon = nil
	s.mu.Unlock()
	s.laneWG.Wait()
	giveUp := time.AfterFunc(s.r.opts.StopTimeout, s.cancelSettle)
	s.mu.Lock()
	s.lanesDone = true
	s.mu.Unlock()
	poke(s.settleWake)
	s.settleWG.Wait()
	giveUp.Stop()
	s.cancelSettle()
	stopManaging()
	manager.Wait()
	s.releaseAll()

	// The session's own cause (a fatal failure), not the one its parent was cancelled with:
	// whatever a caller cancels Run's context with, Run returns nil for it.
	var cause error
	if c := context.Cause(s.ctx); s.ctx.Err() != nil && (s.parent.Err() == nil || c != context.Cause(s.parent)) {
		cause = c
	}
	s.end(nil)
	return cause
}

// handing reports whether an item taken under h may be handed out now. The caller holds mu.
func (s *session[T, K]) handing(h *hold) bool {
	return h != nil && !s.stopping && s.ctx.Err() == nil && s.holds[h.part] == h && !h.draining &&
		h.ctx.Err() == nil && h.lease.live()
}

// partOf is the partition of the execution whose document holds item.
func (s *session[T, K]) partOf(item T) int { return s.r.partOf(s.r.kind.source(item)) }

// route queues item, of lane key lk, on its lane, and starts the lane's goroutine if it has
// none. The caller holds mu.
func (s *session[T, K]) route(lk string, item T) {
	l := &s.lanes[maphash.String(s.r.seed, lk)%uint64(len(s.lanes))]
	l.push(item, time.Now())
	if !l.running {
		l.running = true
		s.laneWG.Add(1)
		go s.deliver(l)
	}
}

// take records item as in flight under h, and routes it to its lane, or to the items
// waiting for their fire time. The caller holds mu.
func (s *session[T, K]) take(h *hold, item T) {
	s.ledger.take(s.r.kind.key(item), h)
	s.r.stats.inFlight.Add(1)
	if at := s.r.kind.dueAt(item); !at.IsZero() && at.After(s.r.opts.Clock()) {
		i := sort.Search(len(s.soon), func(i int) bool { return s.r.kind.dueAt(s.soon[i]).After(at) })
		s.soon = append(s.soon, item)
		copy(s.soon[i+1:], s.soon[i:])
		s.soon[i] = item
		if i == 0 {
			poke(s.soonChanged)
		}
		return
	}
	s.route(s.r.kind.lane(item), item)
}

// fireDue routes the items whose fire time has come, earliest first. The caller holds mu.
func (s *session[T, K]) fireDue() {
	now := s.r.opts.Clock()
	n := 0
	for n < len(s.soon) && !s.r.kind.dueAt(s.soon[n]).After(now) {
		n++
	}
	if n == 0 {
		return
	}
	due := s.soon[:n:n]
	s.soon = s.soon[n:]
	for _, item := range due {
		h := s.ledger.holdOf(s.r.kind.key(item))
		lk := s.r.kind.lane(item)
		if !s.handing(h) || s.retries.holds(lk, time.Now()) {
			s.release(item)
			continue
		}
		s.route(lk, item)
	}
}

// nextFire is the earliest fire time waiting, zero for none. The caller holds mu.
func (s *session[T, K]) nextFire() time.Time {
	if len(s.soon) == 0 {
		return time.Time{}
	}
	return s.r.kind.dueAt(s.soon[0])
}

// release records item as no longer in flight, not acked: it stays pending in the store. Its
// source's next commits are not handed over until a scan found it again. The caller holds mu.
func (s *session[T, K]) release(item T) {
	h := s.ledger.release(s.r.kind.key(item))
	s.r.stats.inFlight.Add(-1)
	if h != nil {
		h.soil(s.r.kind.source(item), s.ledger.scans)
		s.left(h)
	}
	poke(s.progress)
}

// left notes that an item taken under h left flight: a draining hold with nothing in flight
// any more may be released. The caller holds mu.
func (s *session[T, K]) left(h *hold) {
	if h.draining && h.inFlight == 0 {
		poke(s.drained)
	}
}

// poke sends on a channel of capacity 1 without waiting: a pending signal is enough.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
