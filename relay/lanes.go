package relay

import (
	"errors"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
)

// deliver is lane i's goroutine, while its queue is not empty: it hands the lane's items to
// the handler one at a time, in order. A handler's nil queues the item for its ack. A
// failure holds the execution back for a retry, and the item goes back to the store with
// the execution's items queued behind it, as when its hold no longer hands out; over a
// DeadLetters store, once its failure is recorded (dead.go).
func (s *session[T, K]) deliver(i int) {
	defer s.laneWG.Done()
	k, stats := s.r.kind, &s.r.stats
	s.mu.Lock()
	for {
		e := s.fl.pop(i)
		if e == nil {
			s.running[i] = false
			s.mu.Unlock()
			return
		}
		item, lk, h := e.item, e.lane, e.hold
		if !s.handing(h) {
			s.releaseAfter(e)
			continue
		}
		s.mu.Unlock()

		stats.delivered.Add(1)
		ctx, span := s.r.tel.Start(h.handlerCtx, s.r.op, k.describe(item))
		s.r.tel.Lag(time.Since(e.queuedAt))
		ctx, fired := k.fired(ctx, item)
		err := s.r.handle(ctx, item)
		if errors.Is(err, ErrLeavePending) {
			span.EndAs("withheld", nil)
		} else {
			span.End(err)
		}
		removed := fired != nil && s.finishFired(fired, item, err)
		switch {
		case err == nil:
			stats.succeeded.Add(1)
			s.r.tel.Handled(nil)
		case !errors.Is(err, ErrLeavePending) && h.handlerCtx.Err() == nil:
			s.r.tel.Handled(err)
		}

		var report error
		s.mu.Lock()
		switch {
		case err == nil && removed:
			// The handler's commit removed the timer in its own write: its ack completed.
			s.fl.retries.succeeded(lk)
			s.fl.ack(e)
			stats.acked.Add(1)
			stats.carried.Add(1)
		case err == nil:
			s.fl.retries.succeeded(lk)
			s.fl.settle(e, nil, nil)
			poke(s.settleWake)
			poke(s.progress) // settling, it paces no more (see pacing)
		case errors.Is(err, ErrLeavePending):
			stats.withheld.Add(1)
			s.fl.retries.failed(lk, time.Now())
			s.releaseAfter(e)
		case h.handlerCtx.Err() != nil:
			// The hold ended under the handler: not the execution's failure.
			s.releaseAfter(e)
		default:
			stats.handlerErrors.Add(1)
			s.fl.retries.failed(lk, time.Now())
			report = &Error{Op: OpHandle, Item: k.describe(item), Err: err}
			if f := s.failure(err); f != nil {
				// In flight until its failure is recorded; the items behind it go back.
				s.fl.settle(e, f, err)
				s.releaseBehind(i, lk)
				poke(s.settleWake)
			} else {
				s.releaseAfter(e)
			}
		}
		if report != nil {
			s.mu.Unlock()
			s.r.opts.OnError(report)
			s.mu.Lock()
		}
	}
}

// releaseQueued releases h's queued items, with their executions' items behind them, lest
// they wait behind other holds' handlers. The caller holds mu.
func (s *session[T, K]) releaseQueued(h *hold) {
	s.fl.each(queued, func(e *entry[T, K]) {
		if e.hold == h && e.state == queued {
			s.releaseBehind(e.at, e.lane)
		}
	})
}

// releaseBehind releases the items of execution lk queued in lane i. The caller holds mu.
func (s *session[T, K]) releaseBehind(i int, lk string) {
	for _, e := range s.fl.queues[i] {
		if e.state == queued && e.lane == lk {
			s.fl.release(e)
		}
	}
}

// finishFired reports whether a commit of item's handler, given fired, removed item. When
// the handler failed after such a commit it puts the item back (see the package doc).
func (s *session[T, K]) finishFired(fired *wake.FiredTimer, item T, err error) bool {
	removed, restore := fired.Finish(s.ackCtx)
	if err == nil {
		return removed
	}
	if restore == nil {
		return false
	}
	for tries := 1; ; tries++ {
		ok, rerr := restore(s.ackCtx)
		if rerr == nil {
			switch {
			case ok:
				s.r.stats.restored.Add(1)
			case removed:
				s.r.opts.OnError(&Error{Op: OpRestore, Item: s.r.kind.describe(item), Err: ErrNotRestored})
			}
			return false
		}
		if s.ackCtx.Err() != nil || tries >= ackGiveUp || errors.Is(rerr, execstore.ErrClosed) {
			s.r.opts.OnError(&Error{Op: OpRestore, Item: s.r.kind.describe(item), Err: rerr})
			return false
		}
		t := time.NewTimer(s.backoff(tries))
		select {
		case <-t.C:
		case <-s.ackCtx.Done():
			t.Stop()
		}
	}
}
