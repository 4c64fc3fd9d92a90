package relay

import (
	"context"
	"time"
)

// holdState is where a hold is in its life.
type holdState int

const (
	holdActive   holdState = iota // its items are handed out while its lease is live
	holdDraining                  // being handed over: released once nothing of it is in flight
	holdEnded                     // lost, released or stopped
)

// hold is one partition a session holds, from its claim to its end. Its items are handed out
// only while it is active and its lease live (session.handing).
type hold struct {
	part       int
	lease      *lease          // nil: no lease store, held for the whole run
	handlerCtx context.Context // its items' handlers' context, cancelled when it ends
	cancel     context.CancelCauseFunc
	state      holdState
	stoppedAt  time.Time // when it stopped handing items out (draining, lost, stopped)
	inFlight   int       // items taken under the hold and still in flight
	sources    sources
}

// newHold returns the hold of part under ls (nil: none), begun now: a generation of g is
// drawn for it.
func newHold(handlerBase context.Context, part int, ls *lease, g *gens) *hold {
	h := &hold{part: part, lease: ls, sources: newSources(g)}
	h.handlerCtx, h.cancel = context.WithCancelCause(handlerBase)
	return h
}

// stop records, the first time, when the hold stopped handing items out: at, or when its
// lease stopped being live if that was earlier, since none is handed out past it
// (session.handing). A hold handed over or stopped after its lease ran out unrenewed, but
// before the renewer dropped it as lost, thus ends when its lease stopped being live, not
// later: another relay may have taken the partition over once the lease lapsed, and the
// two holds, as OnPartition tells them, must not overlap.
func (h *hold) stop(at time.Time) {
	if !h.stoppedAt.IsZero() {
		return
	}
	if h.lease != nil {
		if end := h.lease.liveUntil(); end.Before(at) {
			at = end
		}
	}
	h.stoppedAt = at
}
