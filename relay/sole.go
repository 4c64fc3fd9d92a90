package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
)

// soleSuffix ends the key of the sole lease: Options.LeaseKey + soleSuffix.
const soleSuffix = "/sole"

// leaseOffer is a store that offers a lease store on its own database: *aio.Store does
// (aio.Store.LeaseStore). A Relay or Sweeper without Options.Lease over such a store holds
// the sole lease in it while it delivers (see the package doc).
type leaseOffer interface {
	LeaseStore(ctx context.Context) (*idem.Store, error)
}

// offeredLeases returns the lease store store offers, as a function the runner calls at each
// claim, or nil when store offers none.
func offeredLeases(store any) func(context.Context) (Leases, error) {
	o, ok := store.(leaseOffer)
	if !ok {
		return nil
	}
	return func(ctx context.Context) (Leases, error) {
		st, err := o.LeaseStore(ctx)
		if err != nil {
			return nil, err
		}
		return st, nil
	}
}

// soleKey is the key of the sole lease.
func (r *runner[T, K]) soleKey() string { return r.opts.LeaseKey + soleSuffix }

// serve runs the sessions of a Run until stopCtx ends or one ends on a fatal failure, and
// returns that failure's cause. Without a sole lease (Options.Lease is set, or the store
// offers no lease store) it is one session. With one, it loops: stand by until the sole
// lease is claimed, run a session while it holds, release it once the session returned.
func (r *runner[T, K]) serve(stopCtx, handlerBase, ackBase, leaseBase context.Context) error {
	if r.offered == nil {
		return newSession(r, handlerBase, ackBase, leaseBase).run(stopCtx.Done())
	}
	key := r.soleKey()
	retry := newBackoff(r.opts.RetryMin, r.opts.RetryMax)
	standing := false // this stand-by was reported
	defer r.stats.standBy(false, "")
	for {
		l, ls, holder, err := r.claimSole(stopCtx, key)
		var pause time.Duration
		switch {
		case ls == nil && stopCtx.Err() != nil:
			return nil
		case errors.As(err, new(*Error)):
			return err
		case err != nil:
			r.opts.OnError(&Error{Op: OpClaim, Item: key, Err: err})
			pause = retry.NextBackOff()
		case ls != nil && (stopCtx.Err() != nil || !ls.live()):
			// Stopped while claiming, or answered too late to hand anything out: given back.
			r.releaseSole(stopCtx, l, ls)
			if stopCtx.Err() != nil {
				return nil
			}
			pause = retry.NextBackOff()
		case ls == nil:
			retry.Reset()
			if holder != r.member { // else its own lease lost, not released, and not lapsed yet
				r.standBy(key, holder, standing)
				standing = true
			}
			pause = r.opts.LeaseDuration / 4
		default:
			retry.Reset()
			standing = false
			r.stats.standBy(false, "")
			if cause := r.soleSession(l, ls, stopCtx, handlerBase, ackBase, leaseBase); cause != nil || stopCtx.Err() != nil {
				return cause
			}
			continue // the sole lease was lost: claimed again at once, or stood by
		}
		t := time.NewTimer(pause)
		select {
		case <-stopCtx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// standBy records that another relay, holder, has the sole lease key, and when this stand-by
// was not reported yet, reports it (ErrStandingBy) and logs it.
func (r *runner[T, K]) standBy(key, holder string, reported bool) {
	r.stats.standBy(true, holder)
	if reported {
		return
	}
	r.opts.OnError(&Error{Op: OpClaim, Item: key, Err: fmt.Errorf("%w (holder %s)", ErrStandingBy, holder)})
	if log := r.opts.Logger; log != nil {
		log.Warn("relay: another relay without a lease delivers this store; this one stands by: it delivers nothing, "+
			"and takes over once that one stops or its lease runs out (claimed every LeaseDuration/4); "+
			"run one relay without Options.Lease per database, or give every relay Options.Lease to share the partitions",
			"key", key, "holder", holder, "lease_duration", r.opts.LeaseDuration)
	}
}

// claimSole claims the sole lease once, in the lease store the store offers (opened within
// stopCtx). It returns the leaser and the lease when the claim got it; no lease and the
// holder's name when another relay holds it; an *Error when no claim can succeed (see
// leaser.claimAs); any other failure to be retried. The claim itself is awaited for up to
// LeaseDuration, even past stopCtx's end: a lease it took is then given back at once rather
// than left to lapse while another relay stands by.
func (r *runner[T, K]) claimSole(stopCtx context.Context, key string) (*leaser, *lease, string, error) {
	st, err := r.offered(stopCtx)
	switch {
	case stopCtx.Err() != nil:
		return nil, nil, "", stopCtx.Err()
	case errors.Is(err, execstore.ErrClosed), errors.Is(err, execstore.ErrInvalid):
		return nil, nil, "", &Error{Op: OpClaim, Item: key, Err: err}
	case err != nil:
		return nil, nil, "", err
	}
	l := r.lease
	l.store = st
	claimCtx, cancel := context.WithTimeout(context.WithoutCancel(stopCtx), r.opts.LeaseDuration)
	defer cancel()
	ls, holder, err := l.claimFrom(claimCtx, key, leaseFingerprint)
	if ls != nil {
		r.stats.leases.Add(1)
		if ls.takeOver {
			r.stats.takeOvers.Add(1)
		}
	}
	return &l, ls, holder, err
}

// soleSession runs a session while the sole lease ls holds, until stopCtx ends, the session
// ends on a fatal failure, or the lease is lost; then it releases the lease, once the
// session's handlers returned and their acks were sent. It returns the session's fatal
// cause, or the renewals' (the lease store closed).
//
// The lease is renewed every LeaseDuration/3 (LeaseDuration/12 after a failed renewal), each
// renewal awaited for up to LeaseDuration and extending the lease from when it was sent,
// never shortening it. When less than LeaseDuration/6 of it is left unrenewed, or a renewal
// finds it taken over, the session stops handing items out and its handlers' context is
// cancelled, as for a partition's lost lease.
func (r *runner[T, K]) soleSession(l *leaser, ls *lease, stopCtx, handlerBase, ackBase, leaseBase context.Context) error {
	// sessionStop ends with stopCtx or when the lease is lost; handlers ends with handlerBase
	// or when the lease is lost; keepCtx, the renewals', once the session returned.
	sessionStop, stopSession := context.WithCancel(stopCtx)
	defer stopSession()
	handlers, cancelHandlers := context.WithCancelCause(handlerBase)
	defer cancelHandlers(nil)
	keepCtx, stopKeeping := context.WithCancel(leaseBase)
	var keeper sync.WaitGroup
	var kept error // why the keeper gave the lease up; read once it returned
	keeper.Go(func() {
		if kept = r.keepSole(keepCtx, l, ls); kept != nil {
			cancelHandlers(kept)
			stopSession()
		}
	})
	cause := newSession(r, handlers, ackBase, leaseBase).run(sessionStop.Done())
	stopKeeping()
	keeper.Wait()
	r.releaseSole(leaseBase, l, ls)
	if fatal := new(*Error); errors.As(kept, fatal) && cause == nil {
		cause = *fatal
	}
	if errors.Is(kept, errLeaseLost) {
		r.stats.leasesLost.Add(1)
		if log := r.opts.Logger; log != nil {
			log.Warn("relay: sole lease lost: this relay stopped delivering and cancelled its handlers; it claims the lease again, "+
				"or stands by while another relay holds it; if this repeats, the lease server answers too slowly for LeaseDuration: raise it",
				"key", ls.key, "cause", kept, "lease_duration", r.opts.LeaseDuration, "last_renewal", ls.lastRoundTrip())
		}
	}
	return cause
}

// releaseSole gives the sole lease up, within StopTimeout whether ctx ended or not (ctx
// gives its values), so that a relay standing by takes it at its next claim rather than
// when it lapses.
func (r *runner[T, K]) releaseSole(ctx context.Context, l *leaser, ls *lease) {
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.StopTimeout)
	defer cancel()
	l.release(releaseCtx, ls)
}

// keepSole renews ls until keepCtx ends, and returns nil then. It returns an error wrapping
// errLeaseLost once ls stops being live (renewed too late) or a renewal finds it taken over,
// and an *Error when the lease store is closed.
func (r *runner[T, K]) keepSole(keepCtx context.Context, l *leaser, ls *lease) error {
	renewCtx, cancel := context.WithCancel(keepCtx)
	var inFlight sync.WaitGroup
	defer inFlight.Wait()
	defer cancel()
	dur := r.opts.LeaseDuration
	answers := make(chan error)
	next := ls.base.Add(dur / 3) // the next renewal
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		if !ls.live() {
			return fmt.Errorf("%w: renewed too late", errLeaseLost)
		}
		timer.Reset(time.Until(earliest(next, ls.liveUntil())))
		select {
		case <-keepCtx.Done():
			return nil
		case err := <-answers:
			if err != nil {
				var fatal *Error
				if errors.As(err, &fatal) || errors.Is(err, errLeaseLost) {
					return err
				}
				next = earliest(next, time.Now().Add(dur/12)) // failed: sooner
			}
			continue
		case <-timer.C:
		}
		if now := time.Now(); !now.Before(next) {
			next = now.Add(dur / 3)
			inFlight.Go(func() {
				err := l.renewSole(renewCtx, ls)
				select {
				case answers <- err:
				case <-renewCtx.Done():
				}
			})
		}
	}
}

// renewSole renews the sole lease once. It returns an error wrapping errLeaseLost when the
// lease was taken over, and renewAll's errors.
func (l *leaser) renewSole(renewCtx context.Context, ls *lease) error {
	renewed, _, err := l.renewAll(renewCtx, []*lease{ls})
	switch {
	case err != nil:
		return err
	case !renewed[0]:
		return fmt.Errorf("%w: fenced", errLeaseLost)
	}
	return nil
}

// earliest is the earlier of a and b.
func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
