package relay

import (
	"errors"
	"time"

	"github.com/execstore/execstore"
)

// ackGiveUp is how many acks of an item whose hold is no longer active may fail before the
// item is released, for the partition's next holder. An active hold's are retried always.
const ackGiveUp = 3

// drainRetry is the wait between the tries of an ack whose hold is no longer active.
func (s *session[T, K]) drainRetry() time.Duration {
	return max(min(s.r.opts.RetryMin, s.r.opts.LeaseDuration/12), time.Millisecond)
}

// hurrySettling makes the writes of h's items due now: h stopped handing items out, and a
// hand-over waits for no long back-off. The caller holds mu.
func (s *session[T, K]) hurrySettling(h *hold) {
	hurried := false
	for _, e := range s.fl.settleQ {
		if e.hold == h && !e.notBefore.IsZero() {
			e.notBefore, hurried = time.Time{}, true
		}
	}
	if hurried {
		poke(s.settleWake)
	}
}

// settleLoop writes the acks and failures' records (dead.go) in batches, one at a time, at
// least ScanGap apart unless Batch wait or the lanes are done. A failed ack is retried, and
// given up (released) when the ack context ends, the store closed, or past ackGiveUp.
func (s *session[T, K]) settleLoop() {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var lastSent time.Time
	for {
		s.mu.Lock()
		for len(s.fl.settleQ) == 0 && !s.lanesDone {
			s.mu.Unlock()
			<-s.settleWake
			s.mu.Lock()
		}
		if len(s.fl.settleQ) == 0 { // the lanes are done and everything is settled
			s.mu.Unlock()
			return
		}
		now := time.Now()
		if s.ackCtx.Err() != nil {
			s.giveUpAll()
			s.mu.Unlock()
			continue
		}
		var ready []*entry[T, K]
		wait := time.Until(lastSent.Add(s.r.opts.ScanGap))
		if wait <= 0 || len(s.fl.settleQ) >= s.r.opts.Batch || s.lanesDone {
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
		s.mu.Unlock()
		lastSent = time.Now()
		s.settleBatch(ready)
	}
}

// readyToSettle takes from settleQ the items whose write may be sent at now, and returns
// how long until the next of the others. The caller holds mu.
func (s *session[T, K]) readyToSettle(now time.Time) (ready []*entry[T, K], wait time.Duration) {
	wait = time.Hour
	kept := s.fl.settleQ[:0]
	for _, e := range s.fl.settleQ {
		switch {
		case e.state != acking && e.state != failing:
		case e.notBefore.After(now):
			wait = min(wait, e.notBefore.Sub(now))
			kept = append(kept, e)
		default:
			ready = append(ready, e)
		}
	}
	clear(s.fl.settleQ[len(kept):])
	s.fl.settleQ = kept
	return ready, wait
}

// giveUpAll releases every item waiting to be settled. The caller holds mu.
func (s *session[T, K]) giveUpAll() {
	for _, e := range s.fl.settleQ {
		if e.state == acking || e.state == failing {
			s.fl.release(e)
		}
	}
	s.fl.settleQ = nil
}

// settleBatch sends batch's failures' records, then its acks in one settle call.
func (s *session[T, K]) settleBatch(batch []*entry[T, K]) {
	var acks []T
	var ackOf, failures []*entry[T, K]
	for _, e := range batch {
		if e.fail == nil {
			acks = append(acks, e.item)
			ackOf = append(ackOf, e)
		} else {
			failures = append(failures, e)
		}
	}
	if len(failures) > 0 {
		s.recordFailures(failures)
	}
	if len(acks) == 0 {
		return
	}
	failed, first := s.settled(ackOf, s.r.kind.settle(s.ackCtx, acks))
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
	for _, e := range failed {
		e.tries++
		if closed || s.ackCtx.Err() != nil || e.hold.state != holdActive && e.tries >= ackGiveUp {
			s.fl.release(e)
			continue
		}
		if e.hold.state == holdActive {
			e.notBefore = now.Add(s.backoff(e.tries))
		} else {
			e.notBefore = now.Add(s.drainRetry())
		}
		s.fl.settleQ = append(s.fl.settleQ, e)
	}
	s.mu.Unlock()
	poke(s.settleWake)
	if closed {
		s.endSession(first)
	}
}

// backoff is the wait before a write that failed tries times is sent again (newBackoff).
func (s *session[T, K]) backoff(tries int) time.Duration {
	b := newBackoff(s.r.opts.RetryMin, s.r.opts.RetryMax)
	d := b.NextBackOff()
	for i := 1; i < min(tries, 64); i++ { // past 64 doublings every wait is RetryMax's
		d = b.NextBackOff()
	}
	return d
}

// settled records the acks that succeeded, and returns those that failed and the first error.
func (s *session[T, K]) settled(batch []*entry[T, K], errs []error) (failed []*entry[T, K], first *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range batch {
		if errs != nil && errs[i] != nil {
			if first == nil {
				first = &Error{Op: OpAck, Item: s.r.kind.describe(e.item), Err: errs[i]}
			}
			failed = append(failed, e)
			continue
		}
		s.fl.ack(e)
	}
	s.r.stats.acked.Add(int64(len(batch) - len(failed)))
	return failed, first
}
