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
// execution's outbox entries and the deletes of its fired timers that waited for it
// (ackCarrier), and the fired timer whose handler makes it (wake.FiredTimer). Each removal is
// guarded by what it removes being there, so a commit that finds one gone matches nothing
// and is sent again without them. A waiting delete of a timer whose path the commit re-arms
// or cancels is carried with no guard: the commit's own operation removes the timer.
type carried struct {
	acks  []*carriedAck // outbox acks and timer deletes
	fired *wake.FiredTimer
	take  uint64 // fired's Take
	token int64  // the commit_token the commit stamps when it carries fired: its restore's guard
}

// takeCarried takes for a commit of exe, at exe.Version, with c, what it may carry, and
// records it in seqs: the fired timer ctx carries when it is one of exe that c leaves alone
// (a re-arm or cancel in c is the timer's fate instead), and the acks and timer deletes
// waiting for exe. Of two removals of one path, the second waits no longer: it is written
// alone.
func (s *Store) takeCarried(ctx context.Context, exe *execstore.Execution, c *execstore.Commit, seqs *ops.Seqs) carried {
	s.carrier.sending()
	if exe.Version == 0 { // a create has nothing to remove
		return carried{}
	}
	var k carried
	paths := map[string]bool{}
	f := wake.FiredTimerOf(ctx, exe.ID, s.signal)
	if f != nil && touchesTimer(c, f.Timer.Path) {
		f.Superseded() // c's own operation is the timer's fate
		f = nil
	}
	if f != nil {
		token := commitToken()
		id, t, version := exe.ID, f.Timer, exe.Version+1
		if take, ok := f.Take(func(ctx context.Context) (bool, error) { return s.restoreTimer(ctx, id, t, version, token) }); ok {
			k.fired, k.take, k.token = f, take, token
			seqs.Fired = append(seqs.Fired, ops.FiredRef{Path: t.Path, FireAt: t.FireAt, Version: t.Version})
			paths[t.Path] = true
		}
	}
	var twice []*carriedAck
	acked := map[int64]bool{}
	for _, a := range s.carrier.take(exe.ID) {
		switch {
		case a.fired == nil && acked[a.seq]: // two acks of one entry: the update can remove it once
			twice = append(twice, a)
			continue
		case a.fired == nil:
			seqs.Acked = append(seqs.Acked, a.seq)
			acked[a.seq] = true
		case touchesTimer(c, a.fired.Path):
			// removed by c's own operation on the path, with no guard
		case paths[a.fired.Path]:
			twice = append(twice, a)
			continue
		default:
			seqs.Fired = append(seqs.Fired, ops.FiredRef{Path: a.fired.Path, FireAt: a.fired.FireAt, Version: a.fired.Version})
			paths[a.fired.Path] = true
		}
		k.acks = append(k.acks, a)
	}
	s.carrier.dropped(twice)
	return k
}

// handedBack resolves what a group commit carried when its caller gave up on it or it was
// refused before the flush (err): the acks are written alone. A fired timer is left to the
// flush when the commit was sent (err matches execstore.ErrOutcomeUnknown): the flush learns
// its outcome.
func (k carried) handedBack(s *Store, err error) {
	s.carrier.dropped(k.acks)
	if k.fired != nil && !errors.Is(err, execstore.ErrOutcomeUnknown) {
		k.fired.Released(k.take)
	}
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
		s.stats.timersCarried.Add(1) // counted before the sweeper hears of it
		k.fired.Removed(k.take)
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

// restoreTimer puts back timer t, as the arming t.Version names, which the commit that
// created version with token removed, if nothing changed the execution since
// (ops.RestoreTimerCommand), and moves the version on by one. Its sweeper calls it when the
// handler that made the commit failed.
func (s *Store) restoreTimer(ctx context.Context, id string, t execstore.DueTimer, version, token int64) (bool, error) {
	if err := contract.ValidateTimerRef(contract.DeleteTimerFields, id, t.Path, t.FireAt); err != nil {
		return false, err
	}
	return submit(ctx, s, opRestoreTimer, id, func(ctx context.Context) (bool, error) {
		s.forget(id) // the restore moves the version on
		ok, err := opsrun.RestoreTimer(ctx, s.env, id, t.Path, t.FireAt, t.Version, version, token)
		s.forget(id)
		return ok, err
	}).Wait(ctx)
}
