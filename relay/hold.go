package relay

import (
	"context"
	"time"
)

// holdState is where a hold is in its life.
type holdState int

const (
	// holdActive: the partition's items are handed out while its lease is live.
	holdActive holdState = iota
	// holdDraining: the partition is being handed over to another relay. Nothing more of it
	// is handed out, and its lease is released once nothing taken under it is in flight.
	holdDraining
	// holdEnded: lost, released or stopped. Nothing more is handed out.
	holdEnded
)

// hold is one partition a session holds, from its claim to its end: its lease, and what it
// knows of the partition's sources. An item of the partition is handed out only while the
// hold is active and its lease live (session.handing).
type hold struct {
	part  int
	lease *lease // nil: no lease store, held for the whole run
	// handlerCtx is the handlers' context for the items taken under the hold. It is
	// cancelled when the hold ends.
	handlerCtx context.Context
	cancel     context.CancelCauseFunc
	state      holdState
	stoppedAt  time.Time // when it stopped handing items out (draining, lost, stopped)
	inFlight   int       // items taken under the hold and still in flight
	sources    sources
}

func newHold(handlerBase context.Context, part int, ls *lease) *hold {
	h := &hold{part: part, lease: ls, sources: newSources()}
	h.handlerCtx, h.cancel = context.WithCancelCause(handlerBase)
	return h
}

// stop records when the hold stopped handing items out, the first time it is called.
func (h *hold) stop(at time.Time) {
	if h.stoppedAt.IsZero() {
		h.stoppedAt = at
	}
}
