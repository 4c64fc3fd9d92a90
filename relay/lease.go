package relay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
)

// leaseFingerprint is the fingerprint every relay claims its leases with: all relays of a key
// make the same request, and only the claim token tells holders apart.
const leaseFingerprint = "execstore/relay/lease"

// errLeaseLost ends the hold of a partition whose lease was fenced (taken over after it
// lapsed) or could not be renewed in time.
var errLeaseLost = errors.New("relay: lease lost")

// leaser claims, renews and releases a relay's leases in an idem store: one per partition
// it holds, and its membership. A lease says who may hand out items; it fences nothing in
// the execution store (see the package doc).
type leaser struct {
	store  *idem.Store // nil: no lease, every partition is held for as long as the run lasts
	dur    time.Duration
	stats  *counters
	report func(error)
	log    *slog.Logger // nil: nothing logged
}

// lease is one lease held: it is known to hold until base+until, base being the moment the
// last claim or renew that succeeded was sent (the server started it no earlier).
type lease struct {
	key       string
	token     string
	dur       time.Duration
	base      time.Time
	until     atomic.Int64 // since base
	claimedAt time.Time    // when the lease server started it, by its clock
	takeOver  bool         // reclaimed from a holder whose lease had lapsed
}

// live reports whether items may be handed out under the lease: it is known to hold for more
// than dur/6 yet. A nil lease (no lease store) is always live.
func (l *lease) live() bool {
	if l == nil {
		return true
	}
	return time.Since(l.base) < time.Duration(l.until.Load())-l.dur/6
}

// claim claims key once. It returns the lease when the claim got it, nil when another holder
// has it, an *Error that ends the run when no claim can succeed (the lease store is closed,
// the key or the duration is refused, or the key is not a relay's), and any other failure
// for the caller to retry later.
func (l *leaser) claim(ctx context.Context, key string) (*lease, error) {
	sent := time.Now()
	c, err := l.store.Claim(ctx, key, leaseFingerprint, 1, l.dur)
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, idem.ErrFingerprintMismatch):
		return nil, &Error{Op: OpClaim, Item: key, Err: fmt.Errorf("%w: %w", ErrLeaseKeyInUse, err)}
	case errors.Is(err, execstore.ErrClosed), errors.Is(err, execstore.ErrInvalid):
		return nil, &Error{Op: OpClaim, Item: key, Err: err}
	case err != nil:
		return nil, err
	case c.Held():
		ls := &lease{key: key, token: c.Token, dur: l.dur, base: sent, takeOver: c.Outcome == idem.LeaseReclaimed}
		if c.Record != nil {
			ls.claimedAt = c.Record.ClaimedAt
		}
		ls.until.Store(int64(l.dur))
		return ls, nil
	case c.Outcome == idem.AlreadyCompleted:
		return nil, &Error{Op: OpClaim, Item: key, Err: ErrLeaseKeyInUse}
	default: // AlreadyClaimed: someone else holds it
		return nil, nil
	}
}

// renewAll renews leases at once, bounded by what is left of the shortest, and reports
// which were renewed. It returns an *Error when the lease store is closed, and any other
// failure for the caller to retry while the leases are live.
func (l *leaser) renewAll(ctx context.Context, leases []*lease) ([]bool, error) {
	if len(leases) == 0 {
		return nil, nil
	}
	sent := time.Now()
	left := time.Duration(1<<62 - 1)
	claims := make([]idem.Held, len(leases))
	for i, ls := range leases {
		left = min(left, time.Duration(ls.until.Load())-l.dur/6-sent.Sub(ls.base))
		claims[i] = idem.Held{Key: ls.key, Token: ls.token}
	}
	// Bounded by the leases' time left, but never so short that a slow server's answer is
	// given up on at once: a renewal given up on still reaches the server.
	rctx, cancel := context.WithTimeout(ctx, max(left, l.dur/3))
	renewed, err := l.store.RenewAll(rctx, claims, l.dur)
	cancel()
	switch {
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case errors.Is(err, execstore.ErrClosed):
		return nil, &Error{Op: OpRenew, Item: leases[0].key, Err: err}
	case err != nil:
		l.report(&Error{Op: OpRenew, Item: leases[0].key, Err: err})
		return nil, err
	}
	for i, ls := range leases {
		if renewed[i] {
			ls.until.Store(int64(sent.Sub(ls.base) + l.dur))
		}
	}
	return renewed, nil
}

// release gives ls up, so that another relay takes it at once rather than when it lapses. A
// failure is reported; the lease then lapses by itself.
func (l *leaser) release(ctx context.Context, ls *lease) {
	if ls == nil {
		return
	}
	if _, err := l.store.Release(ctx, ls.key, ls.token); err != nil {
		l.report(&Error{Op: OpRelease, Item: ls.key, Err: err})
	}
}
