package relay

import (
	"context"
	"hash/maphash"
	"sync"
	"time"
)

// session is one term's delivery machinery, for as long as the relay holds its lease: the
// dispatcher (pump.go) scans and routes items to lanes (lanes.go), whose handlers' successes
// the settler acks (settle.go), all under one lock over the ledger (ledger.go) and the
// executions' retries (retry.go); the lease is renewed beside them (lease.go).
//
// A session ends when its term ends (the lease is lost, the run's context ends, a fatal
// failure: its context is cancelled with the cause) or the run is asked to stop (Close).
// Then, in this order: no item is handed out any more (queued ones are released, pending in
// the store); the handlers in flight are waited for; what they finished is acked, within
// Options.StopTimeout; and only then is the lease no longer renewed, so that a standby
// does not take over while a handler of this session runs (unless the lease is lost).
type session[T any, K comparable] struct {
	r     *runner[T, K]
	lease *held
	// ctx is the term's: handlers and scans get it. It is cancelled with the cause of the
	// term's end: errLeaseLost, a fatal *Error, or the run's context's end.
	ctx    context.Context
	end    context.CancelCauseFunc
	parent context.Context // ctx's parent: the run's
	// settleCtx is the acks'. It outlives ctx: an ack after the handler returned nil is
	// always right, lease or no lease. It ends StopTimeout after the lanes stopped, or when
	// Close's context ends.
	settleCtx    context.Context
	cancelSettle context.CancelFunc

	mu        sync.Mutex
	ledger    ledger[K]
	retries   retries
	lanes     []lane[T]
	heldBack  int  // items the last scan held back for their execution's retry
	stopping  bool // no more deliveries: lanes release what they pop
	settleQ   []T  // handled, awaiting their ack
	lanesDone bool // every lane goroutine has returned: the settler flushes and returns

	laneWG, settleWG sync.WaitGroup
	settleWake       chan struct{} // cap 1: settleQ grew, or lanesDone
	progress         chan struct{} // cap 1: items left flight; the dispatcher may have room
}

func newSession[T any, K comparable](r *runner[T, K], h *held, parent, settleBase context.Context) *session[T, K] {
	s := &session[T, K]{r: r, lease: h, ledger: newLedger[K](),
		retries: newRetries(r.opts.RetryMin, r.opts.RetryMax), lanes: make([]lane[T], r.opts.Lanes),
		settleWake: make(chan struct{}, 1), progress: make(chan struct{}, 1)}
	s.ctx, s.end = context.WithCancelCause(parent)
	s.parent = parent
	s.settleCtx, s.cancelSettle = context.WithCancel(settleBase)
	return s
}

// run runs the term until stop is closed or the term ends, then shuts it down (see the type's
// doc). It returns the cause of the term's end, nil when it was stopped.
func (s *session[T, K]) run(stop <-chan struct{}) error {
	keepCtx, stopKeeping := context.WithCancel(s.ctx)
	var keeper sync.WaitGroup
	keeper.Go(func() { s.lease.keep(keepCtx, s.lost) })
	s.settleWG.Go(s.settleLoop)

	s.dispatch(stop)

	s.mu.Lock()
	s.stopping = true
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
	stopKeeping()
	keeper.Wait()

	// The term's own cause (a lost lease, a fatal failure), not the one its parent was
	// cancelled with: whatever a caller cancels Run's context with, Run returns nil for it.
	var cause error
	if c := context.Cause(s.ctx); s.ctx.Err() != nil && (s.parent.Err() == nil || c != context.Cause(s.parent)) {
		cause = c
	}
	s.end(nil)
	return cause
}

// lost ends the term: its lease was lost, or the lease store closed.
func (s *session[T, K]) lost(cause error) {
	s.r.stats.holding.Store(false)
	s.end(cause)
}

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

// release records item as no longer in flight, not acked: it stays pending in the store. The
// caller holds mu.
func (s *session[T, K]) release(item T) {
	s.ledger.release(s.r.kind.key(item))
	s.r.stats.inFlight.Add(-1)
	poke(s.progress)
}

// poke sends on a channel of capacity 1 without waiting: a pending signal is enough.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
