package relay

import (
	"errors"
	"time"

	"github.com/execstore/execstore"
)

// ackGiveUp is how many failed acks of an item whose hold is no longer active (being handed
// over, or ended) the settler tries before it gives the item up: released, pending in the
// store, to be delivered again by the partition's next holder. An active hold's item is
// retried for as long as the session runs. Once its hold stopped, an item is tried again at
// once, whatever back-off it reached, and then every drainRetry (hurrySettling).
const ackGiveUp = 3

// drainRetry is the wait between the tries of an ack whose hold is no longer active: the
// shorter of RetryMin and LeaseDuration/12, so that a hand-over waits for no long back-off.
func (s *session[T, K]) drainRetry() time.Duration {
	return max(min(s.r.opts.RetryMin, s.r.opts.LeaseDuration/12), time.Millisecond)
}

// hurrySettling makes the writes of h's items waiting in settleQ due now: h stopped handing
// items out, and a back-off reached while it was active no longer holds them. The caller
// holds mu.
func (s *session[T, K]) hurrySettling(h *hold) {
	hurried := false
	for i := range s.settleQ {
		st := &s.settleQ[i]
		if s.ledger.holdOf(s.r.kind.key(st.item)) == h && !st.notBefore.IsZero() {
			st.notBefore, hurried = time.Time{}, true
		}
	}
	if hurried {
		poke(s.settleWake)
	}
}

// settling is an item whose handler returned, waiting for what it settles: its ack (fail
// nil), or the record of its failed delivery in a DeadLetters store (dead.go).
type settling[T any] struct {
	item      T
	fail      *execstore.Failure
	cause     error     // the handler's error, for OnDead
	tries     int       // failed writes so far
	notBefore time.Time // when the next write may be sent, after a failed one
}

// settleLoop writes, in batches, what the handlers settled: the acks of the items whose
// handler returned nil, and the failures of the others (dead.go). One batch is in flight at a
// time, and the next gathers meanwhile; with Options.ScanGap, at least that long after the
// last was sent, unless Batch items wait or the lanes are done (the relay is stopping). An
// ack that completed is recorded in the ledger (against the scans started, see ledger) and
// the item leaves flight. A failed ack is retried after a back-off of its own, while the
// item stays in flight, so no scan hands it out again; the other items' acks go on
// meanwhile. It is given up (released, to be delivered again: at least once) when the ack
// context ends, when the store is closed (which also ends the session), or after ackGiveUp
// failures once the item's hold is no longer active.
func (s *session[T, K]) settleLoop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastSent time.Time
	for {
		s.mu.Lock()
		for len(s.settleQ) == 0 && !s.lanesDone {
			s.mu.Unlock()
			<-s.settleWake
			s.mu.Lock()
		}
		if len(s.settleQ) == 0 { // the lanes are done and everything is settled
			s.mu.Unlock()
			return
		}
		now := time.Now()
		if s.ackCtx.Err() != nil {
			s.giveUpAll()
			s.mu.Unlock()
			continue
		}
		var ready []settling[T]
		wait := time.Until(lastSent.Add(s.r.opts.ScanGap))
		if wait <= 0 || len(s.settleQ) >= s.r.opts.Batch || s.lanesDone {
			ready, wait = s.readyToSettle(now)
		}
		if len(ready) == 0 {
			s.mu.Unlock()
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-s.settleWake: // more to settle, or the lanes are done: look again
			case <-s.ackCtx.Done():
			}
			continue
		}
		s.settlingSent = len(ready)
		s.mu.Unlock()
		lastSent = time.Now()
		s.settleBatch(ready)
		s.mu.Lock()
		s.settlingSent = 0
		s.mu.Unlock()
	}
}

// readyToSettle takes from settleQ the items whose write may be sent at now, and returns
// them with how long until the next of the others may be. The caller holds mu.
func (s *session[T, K]) readyToSettle(now time.Time) (ready []settling[T], wait time.Duration) {
	wait = time.Hour
	kept := s.settleQ[:0]
	for _, st := range s.settleQ {
		if st.notBefore.After(now) {
			wait = min(wait, st.notBefore.Sub(now))
			kept = append(kept, st)
			continue
		}
		ready = append(ready, st)
	}
	clear(s.settleQ[len(kept):])
	s.settleQ = kept
	return ready, wait
}

// giveUpAll releases every item waiting to be settled: the ack context ended. The caller
// holds mu.
func (s *session[T, K]) giveUpAll() {
	for _, st := range s.settleQ {
		s.release(st.item)
	}
	s.settleQ = nil
}

// settleBatch sends the acks of batch in one settle call and its failures' records, and
// applies what came back.
func (s *session[T, K]) settleBatch(batch []settling[T]) {
	var acks []T
	var ackOf, failures []settling[T]
	for _, st := range batch {
		if st.fail == nil {
			acks = append(acks, st.item)
			ackOf = append(ackOf, st)
		} else {
			failures = append(failures, st)
		}
	}
	if len(failures) > 0 {
		s.recordFailures(failures)
	}
	if len(acks) == 0 {
		return
	}
	errs := s.r.kind.settle(s.ackCtx, acks)
	failed, first := s.settled(acks, errs)
	if len(failed) == 0 {
		return
	}
	s.r.stats.ackErrors.Add(int64(len(failed)))
	closed := errors.Is(first.Err, execstore.ErrClosed)
	if s.ackCtx.Err() == nil {
		s.r.opts.OnError(first)
	}
	now := time.Now()
	s.mu.Lock()
	for _, i := range failed {
		st := ackOf[i]
		st.tries++
		h := s.ledger.holdOf(s.r.kind.key(st.item))
		if closed || s.ackCtx.Err() != nil || h == nil || h.state != holdActive && st.tries >= ackGiveUp {
			s.release(st.item)
			continue
		}
		if h.state == holdActive {
			st.notBefore = now.Add(s.backoff(st.tries))
		} else {
			st.notBefore = now.Add(s.drainRetry())
		}
		s.settleQ = append(s.settleQ, st)
	}
	s.mu.Unlock()
	poke(s.settleWake)
	if closed {
		s.endSession(first)
	}
}

// backoff is the wait before a write that failed tries times is sent again: the relay's one
// back-off (newBackoff), RetryMin doubled per failure, at most RetryMax, with ±20% jitter.
func (s *session[T, K]) backoff(tries int) time.Duration {
	b := newBackoff(s.r.opts.RetryMin, s.r.opts.RetryMax)
	d := b.NextBackOff()
	for i := 1; i < min(tries, 64); i++ { // past 64 doublings every wait is RetryMax's
		d = b.NextBackOff()
	}
	return d
}

// settled records the acks of batch that succeeded (errs nil, or a nil error) and returns
// the indexes of the items whose ack failed, with the first failure.
func (s *session[T, K]) settled(batch []T, errs []error) (failed []int, first *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	acked := 0
	for i, item := range batch {
		if errs != nil && errs[i] != nil {
			if first == nil {
				first = &Error{Op: OpAck, Item: s.r.kind.describe(item), Err: errs[i]}
			}
			failed = append(failed, i)
			continue
		}
		s.gone(item)
		acked++
	}
	s.r.stats.acked.Add(int64(acked))
	poke(s.progress)
	return failed, first
}

// gone records that item left the store's pending items by this relay's write (acked, or
// moved to dead): it leaves flight, and neither a late scan nor a hand-over hands it out
// again. The caller holds mu.
func (s *session[T, K]) gone(item T) { s.leave(item, s.ledger.ack) }

// buried is gone for an item moved to dead (ledger.bury). It also soils the item's source:
// a revive may have made the item pending again already, unseen, so the source's next
// commits are not handed over until a scan begun after read it in full. The caller holds mu.
func (s *session[T, K]) buried(item T) {
	s.leave(item, func(k K) *hold {
		h := s.ledger.bury(k)
		if h != nil {
			h.sources.soil(s.r.kind.source(item), s.ledger.scans)
		}
		return h
	})
}

// leave records item as out of flight by record (the ledger's ack or bury). The caller holds
// mu.
func (s *session[T, K]) leave(item T, record func(K) *hold) {
	key := s.r.kind.key(item)
	if h := record(key); h != nil {
		s.left(h)
	}
	s.r.stats.inFlight.Add(-1)
	if src := s.r.kind.source(item); s.committing[src] > 0 {
		if s.ackedDuring[src] == nil {
			s.ackedDuring[src] = map[K]bool{}
		}
		s.ackedDuring[src][key] = true
	}
}
