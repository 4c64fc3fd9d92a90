package relay

import (
	"time"

	"github.com/execstore/execstore/internal/wake"
)

// begun is what Begin returns: the partition's hold (nil if not held), and the epoch.
type begun struct {
	h     *hold
	epoch uint64
}

// Begin is told that a commit of execution id through a store of this process (package
// internal/wake) is about to be sent. It opens an epoch for its hand-over.
func (s *session[T, K]) Begin(id string) any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return begun{h: s.holds[s.r.partOf(id)], epoch: s.fl.begin()}
}

// End takes the items the commit wrote, with no scan, when the same hold handed out since
// Begin, its sources allow it, flight.decide holds none back, and there is room; else it
// owes a scan. It cancels the items waiting that the commit removed.
func (s *session[T, K]) End(id string, b any, c *wake.Committed) {
	from, _ := b.(begun)
	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.fl.finish(from.epoch)
	h := s.holds[s.r.partOf(id)]
	if h == nil {
		return // another relay's partition
	}
	if c == nil {
		// Failed, or its outcome is unknown: it may have written something, or cancelled a
		// timer waiting (which its confirming scan drops). A scan tells.
		h.sources.forget(id)
		s.owe(h, id)
		return
	}
	s.dropCancelled(c)
	ok := from.h == h && s.handing(h) && h.sources.mayHandOver(id, c.Version, s.r.chained)
	h.sources.committed(id, c.Version)
	h.sources.sawItems(id, c.Version) // its items are handed over, or left for a read
	items := s.r.kind.handed(c, s.r.opts.Clock().Add(s.lookAhead()))
	if !ok || s.pacing()+len(items) > 2*s.r.opts.Batch {
		s.owe(h, id)
		return
	}
	now, asOf := time.Now(), s.r.opts.Clock()
	verdicts := make([]verdict, len(items))
	for i, item := range items {
		if verdicts[i] = s.fl.decide(s.r.kind.key(item), s.r.kind.lane(item), from.epoch, now); verdicts[i] == holdBack {
			s.owe(h, id) // a scan hands them out after what comes first
			return
		}
	}
	for i, item := range items {
		if verdicts[i] == hand {
			s.take(h, item, asOf)
			s.r.stats.handedOver.Add(1)
		}
	}
}

// owe soils source and asks for a scan. The caller holds mu.
func (s *session[T, K]) owe(h *hold, source string) {
	h.sources.soil(source, s.fl.epoch)
	s.r.stats.wakeups.Add(1)
	poke(s.rescan)
}

// dropCancelled cancels the waiting and unconfirmed items c removed: only items of c's
// execution can be, and those are the ones of its lane key. The caller holds mu.
func (s *session[T, K]) dropCancelled(c *wake.Committed) {
	if len(c.Timers) == 0 || s.fl.count[waiting]+s.fl.count[unconfirmed] == 0 {
		return
	}
	s.fl.eachTimed(c.ExecutionID, func(e *entry[T, K]) {
		if s.r.kind.gone(c, e.item) {
			s.fl.cancel(e)
		}
	})
	poke(s.soonChanged)
}
