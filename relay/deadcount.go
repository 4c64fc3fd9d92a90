package relay

import (
	"context"
	"time"
)

// countDeadLoop counts the dead items of the partitions handed out (Backlog's Dead) until
// stop: every PollInterval, when one was never counted or DeadCountInterval passed.
func (s *session[T, K]) countDeadLoop(stop <-chan struct{}) {
	var last time.Time // when the last count was sent, by this process's clock
	s.repeat(stop, 0, s.r.opts.PollInterval, func(ctx context.Context) {
		if s.countDeadOnce(ctx, time.Since(last) >= s.r.opts.DeadCountInterval) {
			last = time.Now()
		}
	})
}

// countDeadOnce counts the dead items of the partitions handed out now, when stale or one
// was never counted, and reports whether it sent a count.
func (s *session[T, K]) countDeadOnce(ctx context.Context, stale bool) bool {
	s.mu.Lock()
	var parts []int
	due := stale
	for p, h := range s.holds {
		if s.handing(h) {
			parts = append(parts, p)
			due = due || s.r.book.countedAt(p).IsZero()
		}
	}
	s.mu.Unlock()
	if len(parts) == 0 || !due {
		return false
	}
	at := s.r.opts.Clock()
	s.r.stats.deadCounts.Add(1)
	n, err := s.r.counting.CountDeadIn(ctx, parts)
	if err != nil {
		if ctx.Err() == nil {
			s.r.stats.deadCountErrors.Add(1)
			s.r.opts.OnError(&Error{Op: OpCountDead, Err: err})
		}
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.book.counted(parts, n, at, func(p int) bool { return s.handing(s.holds[p]) })
	return true
}
