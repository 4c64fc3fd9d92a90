package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// maxRenewalsInFlight bounds the renewals not yet answered. Each is awaited for up to
// LeaseDuration and names a lease every LeaseDuration/3, so at most three name a lease;
// leases taken at other times are renewed apart until they fall in step.
const maxRenewalsInFlight = 16

// renewals records, under mu, when each renewal in flight was sent, and whether the last
// answered failed. A lease is renewed once none named it for LeaseDuration/3 (its claim
// counts), and LeaseDuration/12 after one naming it failed.
type renewals struct {
	sent   map[uint64]time.Time // the renewals in flight, by number
	next   uint64
	failed bool // the last renewal answered failed
}

// begin records a renewal sent now, and returns its number.
func (rn *renewals) begin(now time.Time) uint64 {
	if rn.sent == nil {
		rn.sent = map[uint64]time.Time{}
	}
	rn.next++
	rn.sent[rn.next] = now
	return rn.next
}

// end records the answer of renewal n.
func (rn *renewals) end(n uint64, failed bool) {
	delete(rn.sent, n)
	rn.failed = failed
}

// late reports whether a renewal has been in flight for longer than after.
func (rn *renewals) late(now time.Time, after time.Duration) bool {
	for _, at := range rn.sent {
		if now.Sub(at) > after {
			return true
		}
	}
	return false
}

// keepRenewing renews the leases owed a renewal in one write, not waiting for those in
// flight, and drops those that ran out, until leaseCtx ends and every renewal returned.
func (s *session[T, K]) keepRenewing(leaseCtx context.Context) {
	step := max(s.r.opts.LeaseDuration/12, time.Millisecond)
	timer := time.NewTimer(step)
	defer timer.Stop()
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	for {
		select {
		case <-leaseCtx.Done():
			return
		case <-timer.C:
		case <-s.renewWake:
		}
		s.loseWhere((*lease).expired, errLeaseLost)
		now := time.Now()
		s.mu.Lock()
		var owed []*lease
		var member *lease
		if len(s.renewals.sent) < maxRenewalsInFlight {
			owed, member = s.owedRenewal(now)
		}
		var n uint64
		if len(owed) > 0 {
			n = s.renewals.begin(now)
			for _, ls := range owed {
				ls.renewedAt.Store(int64(now.Sub(ls.base)))
			}
		}
		s.mu.Unlock()
		if len(owed) > 0 {
			inFlight.Go(func() {
				failed, fatal := s.renewAll(leaseCtx, owed, member)
				s.mu.Lock()
				s.renewals.end(n, failed)
				if failed { // named again a step after this one was sent
					for _, ls := range owed {
						ls.renewedAt.Store(int64(now.Add(step - s.r.opts.LeaseDuration/3).Sub(ls.base)))
					}
				}
				s.mu.Unlock()
				if failed {
					poke(s.renewWake)
				}
				if fatal != nil {
					s.endSession(fatal)
				}
			})
		}
		timer.Reset(step)
	}
}

// owedRenewal returns the leases owed a renewal now, the member lease among them if owed.
// A lapsed member lease is forgotten: the relay registers again. The caller holds mu.
func (s *session[T, K]) owedRenewal(now time.Time) (owed []*lease, member *lease) {
	for _, h := range s.holds {
		// An expired one is dropped as lost; the sole lease is every hold's.
		if ls := h.lease; ls != nil && !ls.expired() && ls.renewalDue(now) && !slices.Contains(owed, ls) {
			owed = append(owed, ls)
		}
	}
	if m := s.member; m != nil && m.expired() {
		s.member = nil
	}
	if m := s.member; m != nil && m.renewalDue(now) {
		owed, member = append(owed, m), m
	}
	return owed, member
}

// claimsWait reports whether a renewal is late (in flight for longer than LeaseDuration/6)
// or the last one failed: it is most often queued on the lease server behind other lease
// writes, which claims would add to. The caller holds mu.
func (s *session[T, K]) claimsWait() bool {
	return s.renewals.failed || s.renewals.late(time.Now(), s.r.opts.LeaseDuration/6)
}

// renewAll renews leases, member among them if not nil, in one write, and drops the
// partitions whose lease was fenced. It returns an *Error when the lease store is closed.
func (s *session[T, K]) renewAll(leaseCtx context.Context, leases []*lease, member *lease) (failed bool, fatal error) {
	renewed, resumed, err := s.r.lease.renewAll(leaseCtx, leases)
	switch {
	case errors.As(err, new(*Error)):
		return true, err
	case err != nil:
		return true, nil
	}
	for i, ls := range leases {
		switch {
		case renewed[i]:
		case ls == member:
			s.mu.Lock()
			if s.member == member {
				s.member = nil // registered again at the next assignment
			}
			s.mu.Unlock()
		default:
			s.loseWhere(func(l *lease) bool { return l == ls }, fmt.Errorf("%w: fenced", errLeaseLost))
		}
	}
	if resumed {
		poke(s.rescan) // partitions handed out again: a scan owed goes now, not at the next poll
	}
	return false, nil
}
