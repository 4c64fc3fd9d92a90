package relay

import (
	"errors"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/wake"
)

// A lane delivers the items queued in it (flight.queues) one at a time, in the order they
// were queued. Every item of one execution (lane key) is queued in the same lane, so one
// execution's items are never handled twice at once and are handled in the order the scans
// returned them. A lane has a goroutine only while its queue is not empty: at most
// Options.Lanes handler calls are in flight.
//
// deliver is lane i's goroutine: it hands the lane's items to the handler one by one until
// the queue is empty. An item is handed out only while the hold it was taken under is
// handing items out (session.handing); otherwise it is released, pending in the store, with
// its execution's items queued behind it. A handler's nil queues the item for its ack. An
// error holds its execution back for a retry and releases the execution's items queued
// behind it; with a DeadLetters store the failure is recorded first (dead.go), and the item
// stays in flight until it is. ErrLeavePending does the same without an error or a record.
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
		ctx, span := h.handlerCtx, telemetry.Span{}
		if s.r.tel != nil {
			ctx, span = s.r.tel.Start(ctx, s.r.op, k.describe(item))
			s.r.tel.Lag(time.Since(e.queuedAt))
		}
		ctx, fired := k.fired(ctx, item)
		err := s.r.handle(ctx, item)
		if errors.Is(err, ErrLeavePending) {
			span.EndAs("withheld", nil)
		} else {
			span.End(err)
		}
		removed := fired != nil && s.finishFired(fired, item, err)

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
			// The hold ended under the handler (its context was cancelled): not the
			// execution's failure. The item goes back to the store, with the execution's
			// items queued behind it.
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

// releaseQueued releases the items taken under h that wait in a lane, with the items of
// their executions queued there: a hold that stopped handing items out hands out none of
// them, and they would otherwise stay in flight behind the handlers of other holds. The
// caller holds mu.
func (s *session[T, K]) releaseQueued(h *hold) {
	s.fl.each(queued, func(e *entry[T, K]) {
		if e.hold == h && e.state == queued {
			s.releaseBehind(s.fl.laneOf(e.lane), e.lane)
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

// finishFired is called once the handler of item, given fired, returned err. It reports
// whether a commit the handler made removed the item (then it is acked), after waiting for
// such a commit still in flight. When the handler failed after a commit that removed the
// item, or may have, the item is put back first, so that its failure is handled as any
// other's: at least once. It is not put back when its execution committed again since (a
// later commit may have cancelled it): that is reported as ErrNotRestored.
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
