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

// leaseFingerprint is the fingerprint every relay claims its lease with: all relays of a key
// make the same request, and only the claim token tells holders apart.
const leaseFingerprint = "execstore/relay/lease"

// errLeaseLost ends a term whose lease was fenced (taken over after it lapsed) or could not be
// renewed in time; the relay stands by again.
var errLeaseLost = errors.New("relay: lease lost")

// leaser claims, keeps and releases the lease of a Relay or Sweeper in an idem store. The
// lease says who may hand out items; it fences nothing in the execution store (see the
// package doc).
type leaser struct {
	store            *idem.Store // nil: no lease, every term lasts until the run stops
	key              string
	dur              time.Duration
	retryLo, retryHi time.Duration
	stats            *counters
	report           func(error)
	log              *slog.Logger // nil: nothing logged
}

// held is one term's hold on the lease.
type held struct {
	l     *leaser
	token string
	// base is the monotonic origin of until: the lease is known to hold until base+until,
	// the moment the last claim or renew that succeeded was sent, plus the lease's length
	// (the server started it no earlier).
	base  time.Time
	until atomic.Int64
}

// acquire claims the lease until it gets it. A standby (someone else holds a live lease)
// claims again every dur/4; a failed claim is retried with back-off. It returns ctx's error
// when ctx ends, and an *Error when no claim can succeed: the lease store is closed, the key
// or the duration is refused (execstore.ErrInvalid), or the key is not a relay's
// (ErrLeaseKeyInUse).
func (l *leaser) acquire(ctx context.Context) (*held, error) {
	if l.store == nil {
		return &held{l: l}, nil
	}
	b := newBackoff(l.retryLo, max(l.retryLo, min(l.retryHi, l.dur/4)))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		sent := time.Now()
		c, err := l.store.Claim(ctx, l.key, leaseFingerprint, 1, l.dur)
		pause := l.dur / 4
		switch {
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case errors.Is(err, idem.ErrFingerprintMismatch):
			return nil, &Error{Op: OpClaim, Item: l.key, Err: fmt.Errorf("%w: %w", ErrLeaseKeyInUse, err)}
		case errors.Is(err, execstore.ErrClosed), errors.Is(err, execstore.ErrInvalid):
			return nil, &Error{Op: OpClaim, Item: l.key, Err: err}
		case err != nil:
			l.report(&Error{Op: OpClaim, Item: l.key, Err: err})
			pause = b.NextBackOff()
		case c.Held():
			l.stats.leases.Add(1)
			if c.Outcome == idem.LeaseReclaimed {
				l.stats.takeOvers.Add(1)
				if l.log != nil {
					l.log.Info("relay: lease taken over from a holder whose lease had lapsed", "key", l.key)
				}
			}
			h := &held{l: l, token: c.Token, base: sent}
			h.until.Store(int64(l.dur))
			return h, nil
		case c.Outcome == idem.AlreadyCompleted:
			return nil, &Error{Op: OpClaim, Item: l.key, Err: ErrLeaseKeyInUse}
		default: // AlreadyClaimed: stand by
			b.Reset()
		}
		timer.Reset(pause)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}

// live reports whether items may be handed out: the lease is known to hold for more than
// dur/6 yet (always, with no lease).
func (h *held) live() bool {
	if h.l.store == nil {
		return true
	}
	return time.Since(h.base) < time.Duration(h.until.Load())-h.l.dur/6
}

// keep renews the lease every dur/3 (dur/12 after a failed renew) until ctx ends. When a
// renew finds the lease fenced, or dur/6 of it is left unrenewed, it calls lost with
// errLeaseLost, and with an *Error when the lease store is closed; then it returns.
func (h *held) keep(ctx context.Context, lost func(cause error)) {
	l := h.l
	if l.store == nil {
		return
	}
	renewAt := l.dur / 3 // since base
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		now := time.Since(h.base)
		deadline := time.Duration(h.until.Load()) - l.dur/6
		if now >= deadline {
			lost(fmt.Errorf("%w: not renewed in time", errLeaseLost))
			return
		}
		if now < renewAt {
			timer.Reset(min(renewAt, deadline) - now)
			select {
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, deadline-now)
		ok, err := l.store.Renew(rctx, l.key, h.token, l.dur)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && ok:
			h.until.Store(int64(now + l.dur))
			renewAt = now + l.dur/3
		case err == nil:
			lost(fmt.Errorf("%w: fenced", errLeaseLost))
			return
		case errors.Is(err, execstore.ErrClosed):
			lost(&Error{Op: OpRenew, Item: l.key, Err: err})
			return
		default:
			l.report(&Error{Op: OpRenew, Item: l.key, Err: err})
			renewAt = time.Since(h.base) + l.dur/12
		}
	}
}

// release gives the lease up, so that a standby takes over at once rather than when it
// lapses. A failure is reported; the lease then lapses by itself.
func (h *held) release(ctx context.Context) {
	if h.l.store == nil {
		return
	}
	if _, err := h.l.store.Release(ctx, h.l.key, h.token); err != nil {
		h.l.report(&Error{Op: OpRelease, Item: h.l.key, Err: err})
	}
}
