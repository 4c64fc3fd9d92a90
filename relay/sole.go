package relay

import (
	"context"
	"errors"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
)

// soleSuffix ends the key of the sole lease: Options.LeaseKey + soleSuffix.
const soleSuffix = "/sole"

// leaseOffer is a store that offers a lease store: *aio.Store does (aio.Store.LeaseStore). A
// relay without Options.Lease over such a store holds the sole lease there.
type leaseOffer interface {
	LeaseStore(ctx context.Context) (*idem.Store, error)
}

// assignSole claims the sole lease while the session holds nothing, and holds every
// partition under it once it has it. While another relay holds it, the session stands by,
// and says so once per stand-by (ErrStandingBy).
func (s *session[T, K]) assignSole(leaseCtx context.Context) error {
	r := s.r
	s.mu.Lock()
	idle := len(s.holds) == 0 && !s.stopping
	s.mu.Unlock()
	if !idle {
		return nil
	}
	key := r.opts.LeaseKey + soleSuffix
	var err error
	if r.lease.store == nil { // opened by the first claim
		var st *idem.Store
		if st, err = r.offer.LeaseStore(leaseCtx); errors.Is(err, execstore.ErrClosed) {
			return &Error{Op: OpClaim, Item: key, Err: err}
		} else if err == nil {
			s.mu.Lock() // the renewals read it once they hold the lease
			r.lease.store = st
			s.mu.Unlock()
		}
	}
	var ls *lease
	if err == nil {
		ls, err = r.lease.claimAs(leaseCtx, key, leaseFingerprint)
	}
	switch {
	case err != nil:
		if leaseCtx.Err() == nil && !errors.As(err, new(*Error)) {
			r.opts.OnError(&Error{Op: OpClaim, Item: key, Err: err})
		}
		return err
	case ls == nil:
		if !s.standingBy {
			s.standingBy = true
			r.opts.OnError(&Error{Op: OpClaim, Item: key, Err: ErrStandingBy})
			r.opts.Logger.Warn("relay: another relay without a lease delivers this store; this one stands by: it delivers nothing, "+
				"and takes over once that one stops or its lease runs out (claimed every LeaseDuration/4); "+
				"give every relay Options.Lease to share the partitions", "key", key, "lease_duration", r.opts.LeaseDuration)
		}
		return nil
	}
	s.standingBy = false
	r.stats.leases.Add(1) // counted before Stats says Holding
	if ls.takeOver {
		r.stats.takeOvers.Add(1)
	}
	s.mu.Lock() // held even when answered too late or stopping: handing says, releaseAll ends
	for p := range r.parts {
		s.addHold(p, ls)
	}
	s.wideOwed = true
	s.mu.Unlock()
	poke(s.renewWake)
	poke(s.rescan)
	return nil
}
