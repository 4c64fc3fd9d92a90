package relay

import (
	"context"
	"errors"
	"sync"
	"time"
)

// session is one Run's delivery machinery: the dispatcher (pump.go) scans the partitions
// held and queues what its flight (flight.go) takes in lanes (lanes.go), whose outcomes the
// settler writes (settle.go): acks, and failures (dead.go). The flight owns every item from
// its take to its end, and decides what is handed out; the holds (hold.go) and what each
// knows of its sources (sources.go) say where. All of it is under one lock. The partitions'
// leases are claimed, renewed, handed over and released beside them (partitions.go). Commits
// through a store of this process hand their items over (handoff.go).
//
// The contexts, by role, all made by newSession from Run's:
//   - stopCtx: handing out and claiming. It ends with Run's context or at Close (stop).
//   - sessionCtx, the session's life: scans get it. It ends with Run's context, when Close's
//     context ends (abort), or with the cause of a fatal failure.
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
	r          *runner[T, K]
	runCtx     context.Context // Run's
	stopCtx    context.Context
	stop       context.CancelFunc
	sessionCtx context.Context
	endSession context.CancelCauseFunc

	ackCtx    context.Context
	cancelAck context.CancelFunc
	leaseCtx  context.Context
	endLease  context.CancelFunc

	mu       sync.Mutex
	fl       *flight[T, K]
	running  []bool        // by lane: a goroutine delivers its queue
	holds    map[int]*hold // the partitions held now
	gens     gens          // the generations of the holds, published on the board
	member   *lease        // the relay's registration, nil until it is claimed
	renewals renewals      // the renewals in flight, and whether the last failed (renew.go)
	// claimsWaited is set when the last look claimed nothing for a late renewal: the next
	// claims all the same.
	claimsWaited bool
	agreed       bool // the lease key's partitioning record names the relay's number (agree)
	standingBy   bool // another relay holds the sole lease, and it was reported (assignSole)
	// lost holds, for each partition whose lease this relay lost, when that lease was
	// claimed: claiming it again is a re-take, not a take-over.
	lost     map[int]time.Time
	stopping bool // no more deliveries: lanes release what they pop
	// wideOwed is set when a scan of the partitions is owed, not a targeted read (pump.go):
	// a partition was taken, whose hold knows nothing of its sources.
	wideOwed bool
	// leaveNone is set when the next scan of the partitions must leave no source out
	// (pump.go): the last one stopped at its limit or at the cap, so a source it returned
	// may have items it did not return, or marks were missed.
	leaveNone bool
	leftSince map[string]time.Time // the sources the last scan of the partitions left out, since when in a row
	lanesDone bool                 // every lane goroutine has returned: the settler flushes and returns

	laneWG, settleWG sync.WaitGroup
	settleWake       chan struct{} // cap 1: settleQ grew, or lanesDone
	progress         chan struct{} // cap 1: items left flight; the dispatcher may have room
	rescan           chan struct{} // cap 1: a scan is owed (a partition taken, a commit not handed over, a fire time come)
	drained          chan struct{} // cap 1: a draining or ended hold has nothing in flight any more
	soonChanged      chan struct{} // cap 1: the earliest fire time waiting may have changed
	renewWake        chan struct{} // cap 1: a lease was taken, which may be owed a renewal already
}

func newSession[T any, K comparable](r *runner[T, K], runCtx context.Context) *session[T, K] {
	s := &session[T, K]{r: r, runCtx: runCtx, running: make([]bool, r.opts.Lanes),
		holds: map[int]*hold{}, lost: map[int]time.Time{},
		settleWake: make(chan struct{}, 1), progress: make(chan struct{}, 1), rescan: make(chan struct{}, 1),
		drained: make(chan struct{}, 1), soonChanged: make(chan struct{}, 1),
		renewWake: make(chan struct{}, 1)}
	s.fl = newFlight(r.kind, &r.stats, r.opts.Lanes, newRetries(r.opts.RetryMin, r.opts.RetryMax), s.left)
	s.stopCtx, s.stop = context.WithCancel(runCtx)
	s.sessionCtx, s.endSession = context.WithCancelCause(runCtx)
	s.ackCtx, s.cancelAck = context.WithCancel(context.WithoutCancel(runCtx))
	s.leaseCtx, s.endLease = context.WithCancel(context.WithoutCancel(runCtx))
	return s
}

// abort stops the session, and cancels its handlers' context and its acks.
func (s *session[T, K]) abort() {
	s.stop()
	s.endSession(errStopped)
	s.cancelAck()
}

// releaseCtx is the context of a lease's release: the lease context's values, bounded by
// StopTimeout, never cancelled by the end of the run.
func (s *session[T, K]) releaseCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(s.leaseCtx), s.r.opts.StopTimeout)
}

// run runs the session until stopCtx or sessionCtx ends, then shuts it down (see the type's
// doc). It returns the *Error it ended on, nil when it was stopped.
func (s *session[T, K]) run() error {
	stop := s.stopCtx.Done()
	if sig := s.r.signal; sig != nil {
		unsubscribe := sig.Subscribe(s)
		defer unsubscribe()
	}
	if !s.r.leases() { // every partition, for the whole run: scanned at the start
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
	if s.r.rates != nil {
		retainer.Go(func() { s.recordRatesLoop(stop) })
	}
	if s.r.board != nil {
		retainer.Go(func() { s.watchBoard(stop) })
	}

	s.dispatch(stop)
	retainer.Wait()

	s.mu.Lock()
	s.stopping = true
	now := time.Now()
	for _, h := range s.holds {
		h.stop(now)
	}
	for _, st := range []itemState{waiting, unconfirmed} {
		s.fl.each(st, s.fl.release)
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

	// A fatal failure's cause, not one Run's context was cancelled with: whatever a caller
	// cancels it with, Run returns nil for it.
	var fatal *Error
	if c := context.Cause(s.sessionCtx); errors.As(c, &fatal) && c != context.Cause(s.runCtx) {
		s.endSession(nil)
		return fatal
	}
	s.endSession(nil)
	return nil
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

// take takes item, read at asOf (by Options.Clock), under h (flight.take), and starts its
// lane's goroutine when it is queued and the lane has none. The caller holds mu.
func (s *session[T, K]) take(h *hold, item T, asOf time.Time) {
	e := s.fl.take(h, item, asOf, time.Now())
	if e.state == waiting {
		poke(s.soonChanged)
		return
	}
	s.started(e)
}

// started starts the goroutine of e's lane, if it has none. The caller holds mu.
func (s *session[T, K]) started(e *entry[T, K]) {
	if i := e.at; !s.running[i] {
		s.running[i] = true
		s.laneWG.Add(1)
		go s.deliver(i)
	}
}

// fireDue moves the items whose fire time has come to unconfirmed, and asks for the scan
// that confirms them: a commit of another process may have cancelled or re-armed them since
// they were read. Those whose hold no longer hands items out are released. The caller holds
// mu.
func (s *session[T, K]) fireDue() {
	due := s.fl.fire(s.r.opts.Clock())
	for _, e := range due {
		if !s.handing(e.hold) {
			s.fl.release(e)
		}
	}
	if len(due) > 0 {
		poke(s.rescan)
	}
}

// releaseAfter releases e and the items of its execution queued behind it in its lane:
// they must come again after it, and a scan returns them in that order. The caller holds mu.
func (s *session[T, K]) releaseAfter(e *entry[T, K]) {
	i := e.at
	s.fl.release(e)
	s.releaseBehind(i, e.lane)
}

// left is told that an item taken under h left flight: the dispatcher may have room, and a
// draining hold with nothing in flight any more may be released. The caller holds mu.
func (s *session[T, K]) left(h *hold) {
	poke(s.progress)
	if h.inFlight == 0 && h.state == holdDraining {
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
