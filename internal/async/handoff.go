package async

import (
	"context"
	"sync/atomic"
)

// Handoff tracks an operation a worker passed on to a coalescer, so that its caller can still
// give up on time. Exactly one side wins each transition:
//
//	queued ──flush──▶ sent ──flush──▶ settled
//	   │                 │
//	   └─caller─▶ withdrawn (never sent: the caller gets ctx.Err())
//	                     └─caller─▶ abandoned (sent: the caller gets the abandon error;
//	                                the flush then touches neither the future nor the caller's data)
type Handoff struct {
	state    atomic.Int32
	abandon  func(ctxErr error) error // the error of an abandoned operation
	withdraw func(err error)          // settles the future of a withdrawn or abandoned operation
}

const (
	handQueued int32 = iota
	handSent
	handWithdrawn
	handSettled
	handAbandoned
)

// Send marks the operation sent; false means its caller withdrew it.
func (h *Handoff) Send() bool { return h.state.CompareAndSwap(handQueued, handSent) }

// Settle claims the right to settle the operation; false means its caller abandoned it.
func (h *Handoff) Settle() bool { return h.state.CompareAndSwap(handSent, handSettled) }

// giveUp is called by a caller whose context ended: it withdraws a queued operation or
// abandons a sent one, settling the future itself, and reports whether it did.
func (h *Handoff) giveUp(ctx context.Context) bool {
	switch {
	case h.state.CompareAndSwap(handQueued, handWithdrawn):
		h.withdraw(ctx.Err())
		return true
	case h.state.CompareAndSwap(handSent, handAbandoned):
		h.withdraw(h.abandon(ctx.Err()))
		return true
	}
	return false
}

// Refuse settles a queued operation that will never be sent with err (its context ended, or
// the store is closing), unless its caller withdrew it first.
func (h *Handoff) Refuse(err error) {
	if h.state.CompareAndSwap(handQueued, handWithdrawn) {
		h.withdraw(err)
	}
}
