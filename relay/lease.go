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
	"github.com/execstore/execstore/internal/leases"
)

// leaseFingerprint is the fingerprint every relay claims its partitions' leases with: all
// relays of a key make the same request, and only the claim token tells holders apart. A
// relay's member lease adds its number of partitions (runner.memberFingerprint).
const leaseFingerprint = leases.Fingerprint

// errLeaseLost ends the hold of a partition whose lease was fenced (taken over after it
// lapsed) or ran out unrenewed.
var errLeaseLost = errors.New("relay: lease lost")

// Leases is what a relay needs of a lease store: the calls it claims, renews, releases and
// lists its leases with, each as package idem documents it for *idem.Store, which implements
// it. memstore.Leases implements it in memory, with a clock of its own, for tests. Of any
// number of concurrent claims of one key, at most one gets a token; RenewAll and Release act
// only with the current token; a record's expiry is decided by the lease store's clock.
type Leases interface {
	ClaimAs(ctx context.Context, key, fingerprint string, fingerprintVersion int, lease time.Duration, holder string) (idem.Claim, error)
	Complete(ctx context.Context, key, token string, resp idem.Response, retention time.Duration) (bool, error)
	RenewAll(ctx context.Context, claims []idem.Held, lease time.Duration) ([]bool, error)
	Release(ctx context.Context, key, token string) (bool, error)
	List(ctx context.Context, prefix string, limit int) ([]idem.Record, error)
}

var _ Leases = (*idem.Store)(nil)

// leaser claims, renews and releases a relay's leases in its lease store: one per partition
// it holds, and its membership; or the sole lease, for every partition (sole.go). A lease says who may hand out items; it fences nothing in
// the execution store (see the package doc).
type leaser struct {
	store  Leases // nil: no lease, every partition is held for as long as the run lasts
	holder string // the relay's member name, which its claims record as their holder
	dur    time.Duration
	stats  *counters
	report func(error)
	log    *slog.Logger
}

// lease is one lease held. It is known to hold until base+until by this process's clock,
// base being the moment the last claim or renewal that succeeded was sent: the lease server
// started that lease no earlier, so its end by the server's clock comes no sooner.
type lease struct {
	key       string
	token     string
	dur       time.Duration
	base      time.Time
	until     atomic.Int64 // since base
	rtt       atomic.Int64 // the last renewal's round trip, for the log
	renewedAt atomic.Int64 // when the last renewal that names it was sent (or its claim), since base
	claimedAt time.Time    // when the lease server started it, by its clock
	takeOver  bool         // reclaimed from a holder whose lease had lapsed
}

// margin is how much of a lease must be left for items to be handed out under it: an item
// handed out just before the end would otherwise run past it.
func (l *lease) margin() time.Duration { return l.dur / 6 }

// left is how long the lease is known to hold yet.
func (l *lease) left() time.Duration {
	return time.Duration(l.until.Load()) - time.Since(l.base)
}

// live reports whether items may be handed out under the lease: it is known to hold for more
// than its margin yet. A nil lease (no lease store) is always live.
func (l *lease) live() bool { return l == nil || l.left() > l.margin() }

// expired reports whether the lease is no longer known to hold: its holder must take it as
// lost, since another relay may claim it once it lapsed. A nil lease never expires.
func (l *lease) expired() bool { return l != nil && l.left() <= 0 }

// liveUntil is when the lease stops (or stopped) being live, by this process's clock.
func (l *lease) liveUntil() time.Time {
	return l.base.Add(time.Duration(l.until.Load()) - l.margin())
}

// extend makes the lease known to hold until base+until, unless it is known to hold longer
// already: renewals answered out of order never shorten it.
func (l *lease) extend(until time.Duration) {
	for {
		cur := l.until.Load()
		if int64(until) <= cur || l.until.CompareAndSwap(cur, int64(until)) {
			return
		}
	}
}

// renewalDue reports whether the lease is owed a renewal: none that names it was sent for
// LeaseDuration/3, counting its claim as one.
func (l *lease) renewalDue(now time.Time) bool {
	return now.Sub(l.base.Add(time.Duration(l.renewedAt.Load()))) >= l.dur/3
}

// lastRoundTrip is the last renewal's round trip.
func (l *lease) lastRoundTrip() time.Duration { return time.Duration(l.rtt.Load()) }

// claimAs claims key once under fingerprint. It returns the lease when the claim got it, nil
// when another holder has it, an *Error that ends the run when no claim can succeed (the
// lease store is closed, the key or the duration is refused, or the key is not a relay's),
// and any other failure for the caller to retry later.
func (l *leaser) claimAs(ctx context.Context, key, fingerprint string) (*lease, error) {
	sent := time.Now()
	c, err := l.store.ClaimAs(ctx, key, fingerprint, 1, l.dur, l.holder)
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

// renewAll renews leases at once, and reports which were renewed. It waits for the answer
// for up to LeaseDuration, the longest a renewal can extend a lease by: a renewal answered
// late extends each lease from the moment it was sent, and never shortens one that a later
// renewal extended further. It returns an *Error when the lease store is closed, and any
// other failure for the caller to retry while the leases hold. resumed reports that a
// lease the renewal made live again had stopped being live while it was awaited: its
// partition's items may be handed out again.
func (l *leaser) renewAll(ctx context.Context, leases []*lease) (renewed []bool, resumed bool, err error) {
	if len(leases) == 0 {
		return nil, false, nil
	}
	sent := time.Now()
	claims := make([]idem.Held, len(leases))
	for i, ls := range leases {
		claims[i] = idem.Held{Key: ls.key, Token: ls.token}
	}
	// A renewal given up on still reaches the server; what it does there is harmless.
	renewCtx, cancel := context.WithTimeout(ctx, l.dur)
	renewed, err = l.store.RenewAll(renewCtx, claims, l.dur)
	cancel()
	rtt := time.Since(sent)
	switch {
	case ctx.Err() != nil:
		return nil, false, ctx.Err()
	case errors.Is(err, execstore.ErrClosed):
		return nil, false, &Error{Op: OpRenew, Item: leases[0].key, Err: err}
	case err != nil:
		l.report(&Error{Op: OpRenew, Item: leases[0].key, Err: err})
		l.log.Warn("relay: lease renewal failed: retried every LeaseDuration/12 while the leases hold; the relay stops handing a partition's items out when less than LeaseDuration/6 of its lease is left",
			"key", leases[0].key, "leases", len(leases), "waited", rtt, "error", err)
		return nil, false, err
	}
	for i, ls := range leases {
		ls.rtt.Store(int64(rtt))
		if renewed[i] {
			paused := !ls.live()
			ls.extend(sent.Sub(ls.base) + l.dur)
			resumed = resumed || paused && ls.live()
		}
	}
	return renewed, resumed, nil
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
