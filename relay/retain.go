package relay

import "time"

// retainLoop runs the retention (Options.Retention) over the partitions the session hands
// out, one PollInterval after the start and then every RetentionInterval, until stop.
func (s *session[T, K]) retainLoop(stop <-chan struct{}) {
	t := time.NewTimer(s.r.opts.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-s.sessionCtx.Done():
			return
		case <-t.C:
		}
		s.retainOnce(stop)
		t.Reset(s.r.opts.RetentionInterval)
	}
}

// retainOnce reads up to Batch executions past their retention in the partitions handed out
// now and deletes them, again while a read returns Batch.
func (s *session[T, K]) retainOnce(stop <-chan struct{}) {
	store := s.r.retaining
	for {
		select {
		case <-stop:
			return
		default:
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
		expired, err := store.ExpiredIn(s.sessionCtx, parts, cutoffs, s.r.opts.Batch)
		if err != nil {
			s.retainFailed(err)
			return
		}
		if len(expired) == 0 {
			return
		}
		deleted, err := store.DeleteExpired(s.sessionCtx, expired, cutoffs)
		for status, n := range deleted {
			s.r.stats.retained.Add(n)
			s.r.tel.Retained(string(status), n)
		}
		if err != nil {
			s.retainFailed(err)
			return
		}
		if len(expired) < s.r.opts.Batch {
			return
		}
	}
}

// retainFailed counts and reports a failed read or delete of the retention, unless the session
// is ending.
func (s *session[T, K]) retainFailed(err error) {
	if s.sessionCtx.Err() != nil {
		return
	}
	s.r.stats.retentionErrors.Add(1)
	s.r.opts.OnError(&Error{Op: OpRetain, Err: err})
}
