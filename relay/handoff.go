package relay

import (
	"time"

	"github.com/execstore/execstore/internal/wake"
)

// Begin is the session's end of a commit through a store of this process (package
// internal/wake): the commit of execution id is about to be sent. While it is in flight, the
// acks of the execution's items are remembered, so that its hand-over does not hand out
// again what a scan handed out and acked meanwhile. It returns the hold of the execution's
// partition, if the session holds it.
func (s *session[T, K]) Begin(id string) any {
	p := s.r.partOf(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committing[id]++
	if h := s.holds[p]; h != nil {
		return h
	}
	return nil
}

// End takes the items the commit wrote without a scan, when that keeps what always holds:
// the partition was held, under the same hold, from before the commit was sent until now,
// and handed out; the hold's sources allow it (sources.go: the commit is the execution's
// first, or follows the last one the hold knows every item of); and there is room.
// Otherwise it owes a scan, which finds them. A commit that removed an item waiting for its
// fire time (a timer cancelled or re-armed) removes it from the waiting ones.
func (s *session[T, K]) End(id string, begun any, c *wake.Committed) {
	p := s.r.partOf(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	acked := s.ackedDuring[id]
	if s.committing[id]--; s.committing[id] <= 0 {
		delete(s.committing, id)
		delete(s.ackedDuring, id)
	}
	h := s.holds[p]
	if h == nil {
		return // another relay's partition
	}
	if c == nil {
		// Failed, or its outcome is unknown: it may have written something, or cancelled a
		// timer waiting in memory (which its confirming scan then drops). A scan tells.
		h.sources.forget(id)
		s.owe(h, id)
		return
	}
	s.dropCancelled(c)
	from, _ := begun.(*hold)
	ok := from == h && s.handing(h) && h.sources.mayHandOver(id, c.Version, s.r.chained)
	h.sources.committed(id, c.Version)
	if !ok {
		s.owe(h, id)
		return
	}
	items := s.r.kind.handed(c, s.r.opts.Clock().Add(s.lookAhead()))
	if s.pacing()+len(items) > 2*s.r.opts.Batch {
		s.owe(h, id)
		return
	}
	now, asOf := time.Now(), s.r.opts.Clock()
	for _, item := range items {
		if s.waits(s.r.kind.lane(item), now) {
			s.owe(h, id) // its execution waits for a retry: a scan hands it out after
			return
		}
	}
	for _, item := range items {
		// A scan may have read the commit's items already: those in flight or acked are
		// not handed out again.
		if key := s.r.kind.key(item); !s.ledger.holding(key) && !acked[key] {
			s.take(h, item, asOf)
			s.r.stats.handedOver.Add(1)
		}
	}
}

// owe marks the source's items as left in the store and asks for a scan. The caller holds
// mu.
func (s *session[T, K]) owe(h *hold, source string) {
	h.sources.soil(source, s.ledger.scans)
	s.r.stats.wakeups.Add(1)
	poke(s.rescan)
}

// dropCancelled drops the items waiting for their fire time, or for its confirmation, that
// c removed from the store (a timer cancelled or re-armed). The caller holds mu.
func (s *session[T, K]) dropCancelled(c *wake.Committed) {
	if len(c.Timers) == 0 || len(s.soon) == 0 && len(s.unconfirmed) == 0 {
		return
	}
	drop := func(item T) {
		h := s.ledger.release(s.r.kind.key(item))
		s.r.stats.inFlight.Add(-1)
		s.r.stats.cancelled.Add(1)
		if h != nil {
			s.left(h)
		}
	}
	for key, item := range s.unconfirmed {
		if s.r.kind.gone(c, item) {
			delete(s.unconfirmed, key)
			drop(item)
		}
	}
	kept := s.soon[:0]
	for _, item := range s.soon {
		if s.r.kind.gone(c, item) {
			drop(item)
			continue
		}
		kept = append(kept, item)
	}
	clear(s.soon[len(kept):])
	s.soon = kept
	poke(s.soonChanged)
}
