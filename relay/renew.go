package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// maxRenewalsInFlight bounds the renewals a session has sent and not yet heard back from.
// A renewal is sent every LeaseDuration/3 and waits at most LeaseDuration, so three are
// in flight at most while the lease server is slow; the fourth is for a retry after a
// failure.
const maxRenewalsInFlight = 4

// renewals is the session's record of its renewals: when each one in flight was sent, and
// whether the last one answered failed. It is kept under the session's mu.
//
// A renewal does not wait for the one before it: each is sent every LeaseDuration/3 on its
// own (LeaseDuration/12 after a failure) and awaited for up to LeaseDuration, and each that
// succeeds extends the leases from the moment it was sent, never shortening them. So a slow
// answer loses nothing while a later renewal, or the slow one itself, comes back before the
// leases run out: a lease server that answers every write in less than LeaseDuration×2/3
// keeps every lease.
type renewals struct {
	sent   map[uint64]time.Time // the renewals in flight, by number
	next   uint64
	failed bool // the last renewal answered failed
}

// begin records a renewal sent now, and returns its number. The caller holds mu.
func (rn *renewals) begin(now time.Time) uint64 {
	if rn.sent == nil {
		rn.sent = map[uint64]time.Time{}
	}
	rn.next++
	rn.sent[rn.next] = now
	return rn.next
}

// end records the answer of renewal n. The caller holds mu.
func (rn *renewals) end(n uint64, failed bool) {
	delete(rn.sent, n)
	rn.failed = failed
}

// late reports whether a renewal has been in flight for longer than after. The caller holds
// mu.
func (rn *renewals) late(now time.Time, after time.Duration) bool {
	for _, at := range rn.sent {
		if now.Sub(at) > after {
			return true
		}
	}
	return false
}

// keepRenewing renews every lease the session holds every LeaseDuration/3
// (LeaseDuration/12 after a failure), without waiting for the renewals still in flight, and
// drops the partitions whose lease ran out, until leaseCtx ends. It returns once every
// renewal it sent was answered or given up.
func (s *session[T, K]) keepRenewing(leaseCtx context.Context) {
	dur := s.r.opts.LeaseDuration
	step := max(dur/12, time.Millisecond)
	timer := time.NewTimer(step)
	defer timer.Stop()
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	lastSent := time.Now()
	for {
		select {
		case <-leaseCtx.Done():
			return
		case <-timer.C:
		}
		s.dropLost()
		now := time.Now()
		s.mu.Lock()
		due := now.Sub(lastSent) >= dur/3 || s.renewals.failed && now.Sub(lastSent) >= step
		due = due && len(s.renewals.sent) < maxRenewalsInFlight
		var n uint64
		if due {
			n = s.renewals.begin(now)
			lastSent = now
		}
		s.mu.Unlock()
		if due {
			inFlight.Go(func() {
				failed, fatal := s.renewAll(leaseCtx)
				s.mu.Lock()
				s.renewals.end(n, failed)
				s.mu.Unlock()
				if fatal != nil {
					s.endSession(fatal)
				}
			})
		}
		timer.Reset(step)
	}
}

// claimsWait reports whether a renewal of the session is late (in flight for longer than
// a lease's margin, LeaseDuration/6) or the last one failed. A renewal that waits is most
// often queued on the lease server behind other lease writes: claims, which would add to
// that queue, wait a look. The caller holds mu.
func (s *session[T, K]) claimsWait() bool {
	return s.renewals.failed || s.renewals.late(time.Now(), s.r.opts.LeaseDuration/6)
}

// renewAll renews the member lease and every partition's, in one write. It reports whether
// the renewal failed (to be retried soon), and returns an *Error when the lease store is
// closed. A partition whose lease was fenced is dropped alone.
func (s *session[T, K]) renewAll(leaseCtx context.Context) (failed bool, fatal error) {
	s.mu.Lock()
	leases := make([]*lease, 0, len(s.holds)+1)
	for _, h := range s.holds {
		if !h.lease.expired() { // the others are dropped as lost
			leases = append(leases, h.lease)
		}
	}
	member := s.member
	if member != nil && member.expired() {
		s.member, member = nil, nil // lapsed: registered again at the next assignment
	}
	if member != nil {
		leases = append(leases, member)
	}
	s.mu.Unlock()
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
			s.loseLease(ls, fmt.Errorf("%w: fenced", errLeaseLost))
		}
	}
	if resumed {
		poke(s.rescan) // partitions handed out again: a scan owed goes now, not at the next poll
	}
	return false, nil
}
