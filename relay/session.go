package relay

import (
	"context"
	"hash/maphash"
	"sort"
	"sync"
	"time"
)

// session is one Run's delivery machinery: the dispatcher (pump.go) scans the partitions
// held and routes items to lanes (lanes.go), whose outcomes the settler writes (settle.go):
// acks, and failures (dead.go). All of it runs under one lock over the ledger (ledger.go),
// the holds (hold.go) and what each knows of its sources (sources.go), and the executions'
// retries (retry.go). The partitions' leases are claimed, renewed, handed over and released
// beside them (partitions.go). Commits through a store of this process hand their items over
// (handoff.go).
//
// An item's life in a session: taken (by a scan or a hand-over, into the ledger under the
// hold of its partition) → waiting for its fire time (a timer read ahead) → confirmed by a
// scan sent once it is due → queued in its lane → in its handler → settling (its ack, or its
// failure's record) → acked, dead, or released (left pending in the store). An item released
// soils its source (sources.go), and releases the later items of its execution queued behind
// it, so that they come again after it.
//
// The contexts, by role:
//   - sessionCtx, the session's life: scans get it. It ends when Run's context ends, or with the
//     cause of a fatal failure.
//   - each hold's handlerCtx, derived from sessionCtx: the handlers of the hold's items get it. It
//     also ends when the hold does (lease lost, handed over, stopped).
//   - ackCtx: acks and failure records. An ack after the handler returned nil is always
//     right, lease or no lease, so it outlives sessionCtx. It ends StopTimeout after the lanes
//     stopped, or when Close's context ends.
//   - leaseCtx: claims and renewals. It outlives every handler and ack of the session: the
//     leases are kept until they are done, so that no other relay takes a partition over
//     while a handler of this one still runs. Releases get a context of their own, bounded
//     by StopTimeout (releaseCtx).
//
// A session ends when the run is asked to stop (Close, the end of Run's context) or on a
// fatal failure. Then, in this order: no item is handed out any more (queued ones are
// released, pending in the store); the handlers in flight are waited for; what they
// finished is acked, within Options.StopTimeout; and only then are the leases no longer
// renewed, and released.
type session[T any, K comparable] struct {
	r           *runner[T, K]
	sessionCtx  context.Context
	endSession  context.CancelCauseFunc
	handlerBase context.Context // sessionCtx's parent: the run's handlers' base

	ackCtx    context.Context
	cancelAck context.CancelFunc
	leaseCtx  context.Context
	endLease  context.CancelFunc

	mu       sync.Mutex
	ledger   ledger[K]
	retries  retries
	lanes    []lane[T]
	holds    map[int]*hold // the partitions held now
	member   *lease        // the relay's registration, nil until it is claimed
	renewals renewals      // the renewals in flight, and whether the last failed (renew.go)
	// claimsWaited is set when the last look claimed nothing for a late renewal: the next
	// claims all the same.
	claimsWaited bool
	agreed       bool // the lease key's partitioning record names the relay's number (agree)
	// lost holds, for each partition whose lease this relay lost, when that lease was
	// claimed: claiming it again is a re-take, not a take-over.
	lost       map[int]time.Time
	committing map[string]int // commits in flight through this process, by execution (handoff.go)
	// ackedDuring holds, for each execution with a commit in flight, the items of it whose
	// ack completed meanwhile: its hand-over must not hand them out again.
	ackedDuring map[string]map[K]bool
	soon        []T // taken, waiting for their fire time (a Sweeper's), earliest first
	// unconfirmed are the items whose fire time came while they waited in memory: they are
	// handed out once a scan sent after their fire time returns them, and dropped when a
	// complete one does not (a commit of another process cancelled or re-armed them).
	unconfirmed map[K]T
	heldBack    int // items the last scan held back for their execution's retry
	// failing counts, by lane key (execution), the items whose failure is being recorded
	// (dead.go): in flight still, and ahead of the execution's later items.
	failing map[string]int
	// fence holds, by lane key, the scans started when an item of the execution was last
	// released: a scan started no later may have skipped it as in flight, so it hands out
	// none of the execution's items (they would come ahead of it).
	fence    map[string]uint64
	stopping bool // no more deliveries: lanes release what they pop
	// wideOwed is set when a scan of the partitions is owed, not a targeted read (pump.go):
	// a partition was taken, whose hold knows nothing of its sources.
	wideOwed bool
	settleQ  []settling[T]
	// settlingSent is the items of the batch of acks and failure records being sent; with
	// settleQ, the items settling (see pacing).
	settlingSent int
	lanesDone    bool // every lane goroutine has returned: the settler flushes and returns

	laneWG, settleWG sync.WaitGroup
	settleWake       chan struct{} // cap 1: settleQ grew, or lanesDone
	progress         chan struct{} // cap 1: items left flight; the dispatcher may have room
	rescan           chan struct{} // cap 1: a scan is owed (a partition taken, a commit not handed over, a fire time come)
	drained          chan struct{} // cap 1: a draining or ended hold has nothing in flight any more
	soonChanged      chan struct{} // cap 1: the earliest fire time waiting may have changed
	renewWake        chan struct{} // cap 1: a lease was taken, which may be owed a renewal already
}

func newSession[T any, K comparable](r *runner[T, K], handlerBase, ackBase, leaseBase context.Context) *session[T, K] {
	s := &session[T, K]{r: r, ledger: newLedger[K](),
		retries: newRetries(r.opts.RetryMin, r.opts.RetryMax), lanes: make([]lane[T], r.opts.Lanes),
		holds: map[int]*hold{}, lost: map[int]time.Time{}, committing: map[string]int{},
		ackedDuring: map[string]map[K]bool{}, unconfirmed: map[K]T{}, failing: map[string]int{}, fence: map[string]uint64{},
		settleWake: make(chan struct{}, 1), progress: make(chan struct{}, 1), rescan: make(chan struct{}, 1),
		drained: make(chan struct{}, 1), soonChanged: make(chan struct{}, 1),
		renewWake: make(chan struct{}, 1)}
	s.sessionCtx, s.endSession = context.WithCancelCause(handlerBase)
	s.handlerBase = handlerBase
	s.ackCtx, s.cancelAck = context.WithCancel(ackBase)
	s.leaseCtx, s.endLease = context.WithCancel(leaseBase)
	return s
}

// releaseCtx is the context of a lease's release: the lease context's values, bounded by
// StopTimeout, never cancelled by the end of the run.
func (s *session[T, K]) releaseCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(s.leaseCtx), s.r.opts.StopTimeout)
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
	var manager, retainer sync.WaitGroup
	manager.Go(func() { s.manage(s.leaseCtx) })
	s.settleWG.Go(s.settleLoop)
	if s.r.retaining != nil {
		retainer.Go(func() { s.retainLoop(stop) })
	}
	if s.r.counting != nil {
		retainer.Go(func() { s.countDeadLoop(stop) })
	}

	s.dispatch(stop)
	retainer.Wait()

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
	for k, item := range s.unconfirmed {
		delete(s.unconfirmed, k)
		s.release(item)
	}
	s.mu.Unlock()
	s.laneWG.Wait()
	giveUp := time.AfterFunc(s.r.opts.StopTimeout, s.cancelAck)
	s.mu.Lock()
	s.lanesDone = true
	s.mu.Unlock()
	poke(s.settleWake)
	s.settleWG.Wait()
	giveUp.Stop()
	s.cancelAck()
	// Every handler of the session has returned and what they finished is settled: the
	// leases may go.
	s.endLease()
	manager.Wait()
	s.releaseAll()

	// The session's own cause (a fatal failure), not the one its parent was cancelled with:
	// whatever a caller cancels Run's context with, Run returns nil for it.
	var cause error
	if c := context.Cause(s.sessionCtx); s.sessionCtx.Err() != nil && (s.handlerBase.Err() == nil || c != context.Cause(s.handlerBase)) {
		cause = c
	}
	s.endSession(nil)
	return cause
}

// handing reports whether an item taken under h may be handed out now: the session is
// delivering, h is the partition's hold and active, and its lease is live. The caller
// holds mu.
func (s *session[T, K]) handing(h *hold) bool {
	return h != nil && h.state == holdActive && !s.stopping && s.sessionCtx.Err() == nil && s.holds[h.part] == h &&
		h.lease.live()
}

// partOf is the partition of the execution whose document holds item.
func (s *session[T, K]) partOf(item T) int { return s.r.partOf(s.r.kind.source(item)) }

// laneOf is the lane of lane key lk.
func (s *session[T, K]) laneOf(lk string) *lane[T] {
	return &s.lanes[maphash.String(s.r.seed, lk)%uint64(len(s.lanes))]
}

// route queues item, of lane key lk, on its lane, and starts the lane's goroutine if it has
// none. The caller holds mu.
func (s *session[T, K]) route(lk string, item T) {
	l := s.laneOf(lk)
	l.push(item, time.Now())
	if !l.running {
		l.running = true
		s.laneWG.Add(1)
		go s.deliver(l)
	}
}

// take records item as in flight under h, and routes it to its lane when it was due by
// asOf, the moment the store was read (by Options.Clock). An item due later waits for its
// fire time, and then for the scan that confirms it. The caller holds mu.
func (s *session[T, K]) take(h *hold, item T, asOf time.Time) {
	s.ledger.take(s.r.kind.key(item), h)
	s.r.stats.inFlight.Add(1)
	if at := s.r.kind.dueAt(item); !at.IsZero() && at.After(asOf) {
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

// fireDue moves the items whose fire time has come to the unconfirmed ones, and asks for
// the scan that confirms them: a commit of another process may have cancelled or re-armed
// them since they were read. The caller holds mu.
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
		if !s.handing(h) {
			s.release(item)
			continue
		}
		s.unconfirmed[s.r.kind.key(item)] = item
	}
	poke(s.rescan)
}

// nextFire is the earliest fire time waiting, zero for none. The caller holds mu.
func (s *session[T, K]) nextFire() time.Time {
	if len(s.soon) == 0 {
		return time.Time{}
	}
	return s.r.kind.dueAt(s.soon[0])
}

// release records item as no longer in flight, not acked: it stays pending in the store. Its
// source is soiled, so that its next commits are not handed over until a scan found it
// again. The caller holds mu.
func (s *session[T, K]) release(item T) {
	s.fence[s.r.kind.lane(item)] = s.ledger.scans
	h := s.ledger.release(s.r.kind.key(item))
	s.r.stats.inFlight.Add(-1)
	if h != nil {
		h.sources.soil(s.r.kind.source(item), s.ledger.scans)
		s.left(h)
	}
	poke(s.progress)
}

// releaseAfter releases item and the items of its execution queued behind it in its lane:
// they must come again after it, and a scan returns them in that order. The caller holds mu.
func (s *session[T, K]) releaseAfter(item T) {
	lk := s.r.kind.lane(item)
	s.release(item)
	s.releaseBehind(s.laneOf(lk), lk)
}

// left notes that an item taken under h left flight: a draining hold with nothing in flight
// any more may be released. The caller holds mu.
func (s *session[T, K]) left(h *hold) {
	if h.inFlight > 0 {
		return
	}
	if h.state == holdDraining {
		poke(s.drained)
	}
}

// waits reports whether execution lk's items are held back now: it waits for a retry, or an
// item of it is having its failure recorded. The caller holds mu.
func (s *session[T, K]) waits(lk string, now time.Time) bool {
	return s.failing[lk] > 0 || s.retries.holds(lk, now)
}

// poke sends on a channel of capacity 1 without waiting: a pending signal is enough.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
