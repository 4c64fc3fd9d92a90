package idem

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/execstore/execstore/internal/idemcheck"
)

// Result is what Do returns.
type Result struct {
	Response Response
	// Replayed reports that Response is the stored one of an earlier run: fn did not run.
	Replayed bool
}

// Do runs fn at most once at a time per key. It runs fn again when the runner died, or stalled
// past its lease, before storing a response, once that lease lapsed. A completed key's
// response is replayed, and fn not run, for as long as its record is retained. So a side
// effect of fn that must not repeat must be idempotent itself: keyed by the key downstream,
// or written with Claim and Complete under a guard on the claim's token. The first caller
// claims the key (Options.Lease), runs fn with the lease kept alive in the background, and
// stores fn's response for Options.Retention. A later caller gets the stored response with
// Replayed set, without running fn. A caller that finds fn running elsewhere waits for its
// response up to Options.WaitTimeout, then returns ErrInProgress.
//
// fn's context is cancelled, with cause ErrLeaseLost, the moment the lease is lost
// (reclaimed by another caller after it lapsed) or can no longer be renewed in time. Do then
// returns ErrLeaseLost, unless fn's response could still be stored. When fn returns an
// error (or panics), the claim is released so that a retry runs fn again, and the error is
// returned. When fn succeeded but its response could not be stored (ErrLeaseLost, an
// invalid response, a storage error), Result.Response still holds it beside the error.
// A fingerprint that differs from the stored one is a *FingerprintMismatchError.
//
// key may come from a request: Do stores it as ClientKey(key), in the client namespace,
// where it can name no record of the store's other users (the relays' leases, a program's
// own Claim keys). So Get, List, Claim and `execstore idem get` find Do's record under
// ClientKey(key). A *FingerprintMismatchError names key as given; other errors that name a
// record name ClientKey(key). A key longer than MaxClientKeyBytes is refused with
// execstore.ErrInvalid before any I/O.
//
// Cost: a claim, a renew every Lease/3 while fn runs, and a complete or a release.
func (s *Store) Do(ctx context.Context, key, fingerprint string, fn func(ctx context.Context) (Response, error)) (Result, error) {
	if err := validateClientKey(key); err != nil {
		return Result{}, err
	}
	given, key := key, ClientKey(key)
	waitUntil := time.Now().Add(s.opts.WaitTimeout)
	for {
		started := time.Now()
		c, err := s.Claim(ctx, key, fingerprint, s.opts.FingerprintVersion, s.opts.Lease)
		if mismatch := (*FingerprintMismatchError)(nil); errors.As(err, &mismatch) {
			mismatch.Key = given
		}
		if err != nil {
			return Result{}, err
		}
		switch c.Outcome {
		case AlreadyCompleted:
			return Result{Response: *c.Record.Response, Replayed: true}, nil
		case AlreadyClaimed:
			left := time.Until(waitUntil)
			if left <= 0 {
				return Result{}, fmt.Errorf("%w: idempotency key %q", ErrInProgress, given)
			}
			rec, err := s.Wait(ctx, key, left)
			if err != nil {
				return Result{}, err
			}
			if rec != nil {
				return Result{Response: *rec.Response, Replayed: true}, nil
			}
			continue // released or lapsed: claim again (or time out on the next round)
		}
		return s.run(ctx, key, c.Token, started, fn)
	}
}

// run runs fn under the claim of key with token (whose lease started no earlier than
// started) and stores its response, or releases the claim.
func (s *Store) run(ctx context.Context, key, token string, started time.Time,
	fn func(ctx context.Context) (Response, error)) (res Result, err error) {
	lease := keepLease(ctx, s, key, token, started)
	defer func() {
		if p := recover(); p != nil {
			lease.stop()
			s.releaseAfter(ctx, key, token)
			panic(p)
		}
	}()
	resp, err := fn(lease.ctx)
	lost := lease.stop()
	if err != nil {
		return Result{}, errors.Join(err, s.releaseAfter(ctx, key, token))
	}
	if err := idemcheck.Response(resp.Status, resp.Header, resp.Body, s.opts.MaxBodyBytes); err != nil {
		return Result{Response: resp}, errors.Join(err, s.releaseAfter(ctx, key, token))
	}
	ok, err := s.Complete(ctx, key, token, resp, s.opts.Retention)
	if err != nil {
		return Result{Response: resp}, err
	}
	if !ok {
		return Result{Response: resp}, errors.Join(ErrLeaseLost, lost)
	}
	return Result{Response: resp}, nil
}

// releaseAfter releases key after a failed run, even when ctx has ended (the claim would
// otherwise hold the key until its lease lapses), within the settle bound.
func (s *Store) releaseAfter(ctx context.Context, key, token string) error {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.opts.SettleTimeout)
	defer cancel()
	_, err := s.Release(rctx, key, token)
	return err
}

// heldLease is a claim kept alive in the background while its holder runs.
type heldLease struct {
	ctx    context.Context // cancelled with cause ErrLeaseLost when the lease is lost
	cancel context.CancelCauseFunc
	quit   chan struct{}
	done   chan struct{}
}

// keepLease renews key's claim every Lease/3 (every Lease/12 after a failed renew) until
// stop. The lease is known to hold until the start of the last renew that succeeded plus
// Lease (measured on the local monotonic clock, which is all a lease needs: an interval);
// when a renew finds the claim fenced, or that instant comes within Lease/6 without a
// successful renew, the context is cancelled with cause ErrLeaseLost.
func keepLease(parent context.Context, s *Store, key, token string, started time.Time) *heldLease {
	ctx, cancel := context.WithCancelCause(parent)
	h := &heldLease{ctx: ctx, cancel: cancel, quit: make(chan struct{}), done: make(chan struct{})}
	lease := s.opts.Lease
	go func() {
		defer close(h.done)
		validUntil := started.Add(lease)
		timer := time.NewTimer(lease / 3)
		defer timer.Stop()
		for {
			select {
			case <-h.quit:
				return
			case <-ctx.Done():
				return
			case <-timer.C:
			}
			sent := time.Now()
			rctx, rcancel := context.WithDeadline(ctx, validUntil)
			ok, err := s.Renew(rctx, key, token, lease)
			rcancel()
			switch {
			case err == nil && ok:
				validUntil = sent.Add(lease)
				timer.Reset(lease / 3)
			case err == nil:
				cancel(ErrLeaseLost)
				return
			case time.Until(validUntil) <= lease/6:
				cancel(fmt.Errorf("%w: renewing failed: %w", ErrLeaseLost, err))
				return
			default:
				timer.Reset(lease / 12)
			}
		}
	}()
	return h
}

// stop stops renewing and returns the cause of a lost lease, or nil.
func (h *heldLease) stop() error {
	close(h.quit)
	<-h.done
	cause := context.Cause(h.ctx)
	h.cancel(nil)
	if errors.Is(cause, ErrLeaseLost) {
		return cause
	}
	return nil
}
