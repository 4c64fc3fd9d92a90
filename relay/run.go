package relay

import (
	"context"
	"errors"
	"hash/maphash"
	"sync"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/wake"
)

// runner is the life cycle a Relay and a Sweeper share: Run's terms under the lease, Close,
// Stats. Each term is a session.
type runner[T any, K comparable] struct {
	kind    kind[T, K]
	handler func(context.Context, T) error
	opts    Options
	signal  *wake.Signal // nil: the store registered none, the runner only polls
	lease   leaser
	stats   counters
	seed    maphash.Seed         // routes lane keys to lanes
	tel     *telemetry.Telemetry // nil: no-op providers
	op      string               // the handler's operation, in spans: "deliver", "fire"

	mu      sync.Mutex
	closed  bool
	running bool
	// Of the Run in progress: stop makes it stop handing out items and return once its
	// handlers are done; abort also cancels their context and the final acks; done is
	// closed when it returns.
	stop, abort context.CancelFunc
	done        chan struct{}
}

func newRunner[T any, K comparable](k kind[T, K], handler func(context.Context, T) error, opts Options, sig *wake.Signal,
	component, op string) *runner[T, K] {
	r := &runner[T, K]{kind: k, handler: handler, opts: opts, signal: sig, seed: maphash.MakeSeed(), op: op}
	r.tel = telemetry.NewRelay(component, opts.TracerProvider, opts.MeterProvider, r.stats.inFlight.Load)
	r.lease = leaser{store: opts.Lease, key: opts.LeaseKey, dur: opts.LeaseDuration,
		retryLo: opts.RetryMin, retryHi: opts.RetryMax, stats: &r.stats, report: opts.OnError, log: opts.Logger}
	return r
}

// run is Run: terms one after the other, each once the lease is held, until ctx ends, Close
// is called or a term ends on a fatal failure.
func (r *runner[T, K]) run(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return execstore.ErrClosed
	}
	if r.running {
		r.mu.Unlock()
		return ErrRunning
	}
	// stopCtx ends with ctx or at Close: stop handing out and claiming. work ends with ctx or
	// when Close's context ends: the handlers' context. settleBase ends only when Close's
	// context ends: the acks', which a session bounds further by StopTimeout.
	stopCtx, stop := context.WithCancel(ctx)
	work, abortWork := context.WithCancel(ctx)
	settleBase, abortSettle := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	r.running, r.stop, r.done = true, stop, done
	r.abort = func() { abortWork(); abortSettle() }
	r.mu.Unlock()
	defer func() {
		stop()
		abortWork()
		abortSettle()
		r.mu.Lock()
		r.running = false
		r.mu.Unlock()
		close(done)
	}()

	for {
		h, err := r.lease.acquire(stopCtx)
		if err != nil {
			if stopCtx.Err() != nil {
				return nil
			}
			return err
		}
		cause := r.term(stopCtx, work, settleBase, h)
		var fatal *Error
		switch {
		case errors.Is(cause, errLeaseLost):
			r.stats.leasesLost.Add(1)
			if r.opts.Logger != nil {
				r.opts.Logger.Warn("relay: lease lost while delivering: standing by", "key", r.opts.LeaseKey)
			}
			if stopCtx.Err() != nil {
				return nil
			}
		case errors.As(cause, &fatal):
			return fatal
		default: // stopped, or ctx ended
			return nil
		}
	}
}

// term runs one session under the lease h and gives the lease up when it ends.
func (r *runner[T, K]) term(stopCtx, work, settleBase context.Context, h *held) error {
	s := newSession(r, h, work, settleBase)
	r.stats.holding.Store(true)
	cause := s.run(stopCtx.Done())
	r.stats.holding.Store(false)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(work), r.opts.StopTimeout)
	h.release(ctx)
	cancel()
	return cause
}

// close is Close: stop the Run in progress, if any, and wait for it within ctx; when ctx
// ends first, cancel its handlers and acks and return ctx's error.
func (r *runner[T, K]) close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	running, stop, abort, done := r.running, r.stop, r.abort, r.done
	r.mu.Unlock()
	if !running {
		return nil
	}
	stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		abort()
		return ctx.Err()
	}
}
