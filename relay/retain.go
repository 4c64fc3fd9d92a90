package relay

import "context"

// retainLoop runs Options.Retention over the partitions handed out, a PollInterval after
// the start and then every RetentionInterval, until stop.
func (s *session[T, K]) retainLoop(stop <-chan struct{}) {
	s.repeat(stop, s.r.opts.PollInterval, s.r.opts.RetentionInterval, s.retainOnce)
}

// retainOnce reads up to Batch executions past their retention in the partitions handed out
// now and deletes them, again while a read returns Batch.
func (s *session[T, K]) retainOnce(ctx context.Context) {
	store := s.r.retaining
	for {
		if ctx.Err() != nil {
			return
		}
		s.mu.Lock()
		var parts []int
		for p, h := range s.holds {
			if s.handing(h) {
				parts = append(parts, p)
			}
		}
		s.mu.Unlock()
		cutoffs := s.r.opts.Retention.Cutoffs(s.r.opts.Clock())
		if len(parts) == 0 || cutoffs == nil {
			return
		}
		expired, err := store.ExpiredIn(ctx, parts, cutoffs, s.r.opts.Batch)
		if err != nil {
			s.retainFailed(ctx, err)
			return
		}
		if len(expired) == 0 {
			return
		}
		deleted, err := store.DeleteExpired(ctx, expired, cutoffs)
		for status, n := range deleted {
			s.r.stats.retained.Add(n)
			s.r.tel.Retained(string(status), n)
		}
		if err != nil {
			s.retainFailed(ctx, err)
			return
		}
		if len(expired) < s.r.opts.Batch {
			return
		}
	}
}

// retainFailed counts and reports a failed read or delete of the retention, unless ctx
// ended.
func (s *session[T, K]) retainFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	s.r.stats.retentionErrors.Add(1)
	s.r.opts.OnError(&Error{Op: OpRetain, Err: err})
}
