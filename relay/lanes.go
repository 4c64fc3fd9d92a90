package relay

import (
	"errors"
	"slices"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/wake"
)

// lane delivers the items routed to it one at a time, in the order they were routed. Every
// item of one execution (lane key) is routed to the same lane, so one execution's items are
// never handled twice at once and are handled in the order the scans returned them. A lane
// has a goroutine only while its queue is not empty: at most Options.Lanes handler calls are
// in flight.
type lane[T any] struct {
	queue   []queued[T]
	head    int
	running bool // a goroutine is delivering the queue
}

// queued is an item in a lane, and when the scan that found it routed it.
type queued[T any] struct {
	item T
	at   time.Time
}

func (l *lane[T]) push(item T, at time.Time) { l.queue = append(l.queue, queued[T]{item, at}) }

func (l *lane[T]) pop() (queued[T], bool) {
	var zero queued[T]
	if l.head == len(l.queue) {
		l.queue, l.head = l.queue[:0], 0
		return zero, false
	}
	q := l.queue[l.head]
	l.queue[l.head] = zero
	l.head++
	return q, true
}

// deliver is a lane's goroutine: it hands the lane's items to the handler one by one until
// the queue is empty. An item is handed out only while the hold it was taken under is
// handing items out (session.handing); otherwise it is released, pending in the store, with
// its execution's items queued behind it. A handler's nil queues the item for its ack. An
// error holds its execution back for a retry and releases the execution's items queued
// behind it; with a DeadLetters store the failure is recorded first (dead.go), and the item
// stays in flight until it is. ErrLeavePending does the same without an error or a record.
func (s *session[T, K]) deliver(l *lane[T]) {
	defer s.laneWG.Done()
	k, stats := s.r.kind, &s.r.stats
	s.mu.Lock()
	for {
		q, ok := l.pop()
		item := q.item
		if !ok {
			l.running = false
			s.mu.Unlock()
			return
		}
		lk := k.lane(item)
		h := s.ledger.holdOf(k.key(item))
		if !s.handing(h) {
			s.releaseAfter(item)
			continue
		}
		s.mu.Unlock()

		stats.delivered.Add(1)
		ctx, span := h.handlerCtx, telemetry.Span{}
		if s.r.tel != nil {
			ctx, span = s.r.tel.Start(ctx, s.r.op, k.describe(item))
			s.r.tel.Lag(time.Since(q.at))
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
			s.retries.succeeded(lk)
			s.gone(item)
			stats.acked.Add(1)
			stats.carried.Add(1)
			poke(s.progress)
		case err == nil:
			s.retries.succeeded(lk)
			s.settleQ = append(s.settleQ, settling[T]{item: item})
			poke(s.settleWake)
			poke(s.progress) // settling, it paces no more (see pacing)
		case errors.Is(err, ErrLeavePending):
			stats.withheld.Add(1)
			s.retries.failed(lk, time.Now())
			s.releaseAfter(item)
		case h.handlerCtx.Err() != nil:
			// The hold ended under the handler (its context was cancelled): not the
			// execution's failure. The item goes back to the store, with the execution's
			// items queued behind it.
			s.releaseAfter(item)
		default:
			stats.handlerErrors.Add(1)
			s.retries.failed(lk, time.Now())
			report = &Error{Op: OpHandle, Item: k.describe(item), Err: err}
			if f := s.failure(item, err); f != nil {
				// In flight until its failure is recorded; the items behind it go back.
				s.failing[lk]++
				s.releaseBehind(l, lk)
				s.settleQ = append(s.settleQ, settling[T]{item: item, fail: f, cause: err})
				poke(s.settleWake)
			} else {
				s.releaseAfter(item)
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
	k := s.r.kind
	for i := range s.lanes {
		l := &s.lanes[i]
		var of []string
		for _, q := range l.queue[l.head:] {
			if lk := k.lane(q.item); s.ledger.holdOf(k.key(q.item)) == h && !slices.Contains(of, lk) {
				of = append(of, lk)
			}
		}
		for _, lk := range of {
			s.releaseBehind(l, lk)
		}
	}
}

// releaseBehind releases the items of execution lk queued in l. The caller holds mu.
func (s *session[T, K]) releaseBehind(l *lane[T], lk string) {
	kept := l.queue[:l.head]
	for _, q := range l.queue[l.head:] {
		if s.r.kind.lane(q.item) == lk {
			s.release(q.item)
		} else {
			kept = append(kept, q)
		}
	}
	clear(l.queue[len(kept):])
	l.queue = kept
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
