package relay

import (
	"context"
	"time"
)

// chainLimit bounds the sources a hold remembers the last commit of (hold.chain). Past it
// the hold forgets them all: their next commits are found by a scan, which costs one server
// command, and they are remembered again.
const chainLimit = 1 << 14

// hold is one partition a session holds: its lease, and what the session knows of the
// partition's sources. An item of the partition is handed out only while the hold is the
// session's current one for the partition, is not draining, and its lease is live.
type hold struct {
	part  int
	lease *lease // nil: no lease store, held for the whole run
	// ctx is the handlers' context for the partition's items. It ends with the hold.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// draining: the partition is being handed over. Nothing more is handed out, and the
	// lease is released once no item of it is in flight.
	draining  bool
	stoppedAt time.Time // when the hold stopped handing items out (draining, lost, stopped)
	inFlight  int       // items in flight taken under the hold
	// chain maps a source execution to the version of its last commit through this process
	// that the hold saw, when every item that source wrote up to that version is known to
	// the session: in flight, or acked. Only then may its next commit's items be handed
	// over without a scan. dirty maps a source to the number of scans started when some of
	// its items were left in the store (a commit not handed over, an item released): its
	// commits are not handed over until a scan started after that returned its items.
	chain map[string]int64
	dirty map[string]uint64
}

func newHold(parent context.Context, part int, ls *lease) *hold {
	h := &hold{part: part, lease: ls, chain: map[string]int64{}, dirty: map[string]uint64{}}
	h.ctx, h.cancel = context.WithCancelCause(parent)
	return h
}

// remember records that every item source wrote up to version is known.
func (h *hold) remember(source string, version int64) {
	if len(h.chain) >= chainLimit {
		clear(h.chain)
	}
	h.chain[source] = version
}

// follows reports whether a commit of source creating version may be handed over: the
// source is not dirty, and, when its items are kept in commit order (chained), the commit is
// its first, or follows the last one the hold knows every item of.
func (h *hold) follows(source string, version int64, chained bool) bool {
	if _, dirty := h.dirty[source]; dirty {
		return false
	}
	if !chained || version == 1 {
		return true
	}
	last, ok := h.chain[source]
	return ok && last == version-1
}

// soil records that some of source's items are left in the store, as of scan count n.
func (h *hold) soil(source string, n uint64) { h.dirty[source] = n }

// stop records when the hold stopped handing items out, the first time it is called.
func (h *hold) stop(at time.Time) {
	if h.stoppedAt.IsZero() {
		h.stoppedAt = at
	}
}
