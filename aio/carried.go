package aio

import (
	"context"
	"errors"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/ops"
)

// carried is what a commit removes in passing, in its own write: the acks of its
// execution's outbox entries that waited for it (ackCarrier), and the fired timer whose
// handler makes it (wake.FiredTimer). Each removal is guarded by what it removes being
// there, so a commit that finds one gone matches nothing and is sent again without them.
type carried struct {
	acks  []*carriedAck
	fired *wake.FiredTimer
	take  uint64 // fired's Take
	token int64  // the commit_token the commit stamps when it carries fired: its restore's guard
}

// takeCarried takes for a commit of exe, at exe.Version, with c, what it may carry, and
// records it in seqs: the acks waiting for exe, and the fired timer ctx carries when it is
// one of exe that c leaves alone (a re-arm or cancel in c is the timer's fate instead).
func (s *Store) takeCarried(ctx context.Context, exe *execstore.Execution, c *execstore.Commit, seqs *ops.Seqs) carried {
	if exe.Version == 0 { // a create has nothing to remove
		return carried{}
	}
	var k carried
	k.acks = s.carrier.take(exe.ID)
	seqs.Acked = seqsOf(k.acks)
	f := wake.FiredTimerOf(ctx, exe.ID)
	if f == nil || touchesTimer(c, f.Timer.Path) {
		return k
	}
	token := commitToken()
	id, t, version := exe.ID, f.Timer, exe.Version+1
	take, ok := f.Take(func(ctx context.Context) (bool, error) { return s.restoreTimer(ctx, id, t, version, token) })
	if !ok {
		return k
	}
	k.fired, k.take, k.token = f, take, token
	seqs.Fired = &ops.FiredRef{Path: t.Path, FireAt: t.FireAt}
	return k
}

// touchesTimer reports whether c schedules or cancels the timer at path.
func touchesTimer(c *execstore.Commit, path string) bool {
	for _, op := range c.Timers {
		if op.Path == path {
			return true
		}
	}
	return false
}

// won resolves what the commit carried: its write won, so everything it carried is gone.
func (k carried) won(s *Store) {
	s.carrier.carried(k.acks)
	if k.fired != nil {
		k.fired.Removed(k.take)
		s.stats.timersCarried.Add(1)
	}
}

// lost resolves what a commit carried that failed with err: the acks are written alone, and
// the fired timer is left to the sweeper, which restores it if the commit may have been
// applied (err matches execstore.ErrOutcomeUnknown) and its handler fails.
func (k carried) lost(s *Store, err error) {
	s.carrier.dropped(k.acks)
	switch {
	case k.fired == nil:
	case errors.Is(err, execstore.ErrOutcomeUnknown):
		k.fired.MaybeRemoved(k.take)
	default:
		k.fired.Released(k.take)
	}
}

// gone resolves what a commit carried that matched nothing for one of its removals' guards
// (opsrun.CarriedGoneError): nothing was written. It returns seqs without the removals, for
// the commit to be sent again without them.
func (k *carried) gone(s *Store, seqs ops.Seqs) ops.Seqs {
	s.carrier.dropped(k.acks)
	if k.fired != nil {
		k.fired.Released(k.take)
	}
	*k = carried{}
	seqs.Acked, seqs.Fired = nil, nil
	return seqs
}

// restoreTimer puts back timer t, which the commit that created version with token removed,
// if nothing changed the execution since (ops.RestoreTimerCommand). Its sweeper calls it
// when the handler that made the commit failed.
func (s *Store) restoreTimer(ctx context.Context, id string, t execstore.DueTimer, version, token int64) (bool, error) {
	if err := contract.ValidateTimerRef(contract.DeleteTimerFields, id, t.Path, t.FireAt); err != nil {
		return false, err
	}
	return submit(ctx, s, opRestoreTimer, id, func(ctx context.Context) (bool, error) {
		return opsrun.RestoreTimer(ctx, s.env, id, t.Path, t.FireAt, version, token)
	}).Wait(ctx)
}
