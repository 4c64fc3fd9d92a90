package relay

import (
	"errors"
	"time"

	"github.com/execstore/execstore"
)

// settleLoop acks, in batches, the items whose handler returned nil: one batch at a time,
// the next gathering while one is in flight, and, with Options.ScanGap, for at least that
// long after the last was sent, unless Batch items wait or the lanes are done (the relay is
// stopping). An ack that completed is
// recorded in the ledger (against the scans started, see ledger) and the item leaves flight.
// A failed ack is retried with back-off while the item stays in flight, so no scan hands it
// out again; it is given up (released, to be delivered again: at least once) when the
// settle context ends or the store is closed, which also ends the term.
func (s *session[T, K]) settleLoop() {
	b := newBackoff(s.r.opts.RetryMin, s.r.opts.RetryMax)
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
		if wait := time.Until(lastSent.Add(s.r.opts.ScanGap)); wait > 0 && len(s.settleQ) < s.r.opts.Batch &&
			!s.lanesDone && s.settleCtx.Err() == nil {
			s.mu.Unlock()
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-s.settleWake: // more to ack, or the lanes are done: look again
			case <-s.settleCtx.Done():
			}
			continue
		}
		lastSent = time.Now()
		batch := s.settleQ
		s.settleQ = nil
		s.mu.Unlock()
		if len(batch) == 0 {
			return // the lanes are done and everything is settled
		}

		errs := s.r.kind.settle(s.settleCtx, batch)
		failed, first := s.settled(batch, errs)
		if len(failed) == 0 {
			b.Reset()
			continue
		}
		s.r.stats.ackErrors.Add(int64(len(failed)))
		closed := errors.Is(first.Err, execstore.ErrClosed)
		if s.settleCtx.Err() == nil {
			s.r.opts.OnError(first)
		}
		if closed || s.settleCtx.Err() != nil {
			s.mu.Lock()
			for _, item := range failed {
				s.release(item)
			}
			s.mu.Unlock()
			if closed {
				s.end(first)
			}
			continue
		}
		s.mu.Lock()
		s.settleQ = append(failed, s.settleQ...)
		s.mu.Unlock()
		timer.Reset(b.NextBackOff())
		select {
		case <-s.settleCtx.Done():
		case <-timer.C:
		}
	}
}

// settled records the acks of batch that succeeded (errs nil, or a nil error) and returns
// the items whose ack failed, with the first failure.
func (s *session[T, K]) settled(batch []T, errs []error) (failed []T, first *Error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	acked := 0
	for i, item := range batch {
		if errs != nil && errs[i] != nil {
			if first == nil {
				first = &Error{Op: OpAck, Item: s.r.kind.describe(item), Err: errs[i]}
			}
			failed = append(failed, item)
			continue
		}
		key := s.r.kind.key(item)
		if h := s.ledger.ack(key); h != nil {
			s.left(h)
		}
		if src := s.r.kind.source(item); s.committing[src] > 0 {
			if s.ackedDuring[src] == nil {
				s.ackedDuring[src] = map[K]bool{}
			}
			s.ackedDuring[src][key] = true
		}
		acked++
	}
	s.r.stats.acked.Add(int64(acked))
	s.r.stats.inFlight.Add(-int64(acked))
	poke(s.progress)
	return failed, first
}
