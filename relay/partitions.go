package relay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/conc/pool"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/leases"
)

// The causes a hold's context ends with, besides errLeaseLost.
var (
	errHandedOver = errors.New("relay: partition handed over to another relay")
	errStopped    = errors.New("relay: stopped")
)

// claimFanOut bounds the claims a relay has in flight at once. The lease server may run
// one write at a time (the embedded server does, per database): every claim queued there
// ahead of a renewal delays it, so the relays' claims together must stay few.
const claimFanOut = 4

// memberKey is the key under which the relay registers itself, and partitionKey the key of
// partition p's lease. A store that is not partitioned has one lease, Options.LeaseKey.
func (r *runner[T, K]) memberKey() string { return leases.MemberKey(r.opts.LeaseKey, r.member) }

func (r *runner[T, K]) membersPrefix() string { return leases.MembersPrefix(r.opts.LeaseKey) }

func (r *runner[T, K]) partitionsPrefix() string { return leases.PartitionsPrefix(r.opts.LeaseKey) }

// leasesPrefix is the prefix of the partitions' leases: their common prefix, or the one
// lease of a store that is not partitioned.
func (r *runner[T, K]) leasesPrefix() string {
	if !r.partitioned() {
		return r.opts.LeaseKey
	}
	return r.partitionsPrefix()
}

// memberFingerprint is the fingerprint of the relay's member lease: it names the number of
// partitions, so that relays that would share them otherwise see that they disagree.
func (r *runner[T, K]) memberFingerprint() string { return leases.MemberFingerprint(r.parts) }

// partitionsOf is the number of partitions a member fingerprint names, "none" for one of
// an earlier version.
func partitionsOf(fingerprint string) string {
	if n, ok := leases.PartitionsOfMember(fingerprint); ok {
		return strconv.Itoa(n)
	}
	return "none"
}

func (r *runner[T, K]) partitionKey(p int) string {
	if !r.partitioned() {
		return r.opts.LeaseKey
	}
	return leases.PartitionKey(r.opts.LeaseKey, p)
}

// manage keeps the session's partitions until leaseCtx ends. Without a lease store there is
// nothing to keep: the session holds every partition for the whole run. With one, every
// LeaseDuration/4 it registers the relay (its member lease), lists the live relays, and
// wants the partitions p for which the relay is the (p mod n)-th of the n live relays in key
// order. It hands over the partitions it holds and no longer wants: nothing more of them is
// handed out, and each lease is released once no item of the partition is in flight. It
// claims the ones it wants and does not hold: a claim succeeds once the previous holder
// released it or its lease lapsed. It renews every lease it holds every LeaseDuration/3
// (LeaseDuration/12 after a failure), and drops a partition whose lease is fenced or runs
// out: nothing more of it is handed out, and its handlers' context is cancelled.
func (s *session[T, K]) manage(leaseCtx context.Context) {
	if s.r.lease.store == nil {
		return // the session holds every partition from its start
	}
	// The renewals run apart from the claims, so that a slow round of claims never keeps a
	// lease from being renewed.
	var wg sync.WaitGroup
	wg.Go(func() { s.keepRenewing(leaseCtx) })
	s.keepAssigning(leaseCtx)
	wg.Wait()
}

// keepAssigning looks at the live relays and claims or hands over partitions every
// LeaseDuration/4, and releases the partitions handed over once nothing of them is in
// flight, until leaseCtx ends.
func (s *session[T, K]) keepAssigning(leaseCtx context.Context) {
	dur := s.r.opts.LeaseDuration
	timer := time.NewTimer(0)
	defer timer.Stop()
	var lastAssign time.Time
	for {
		select {
		case <-leaseCtx.Done():
			return
		case <-timer.C:
		case <-s.drained:
		}
		if lastAssign.IsZero() || time.Since(lastAssign) >= dur/4 {
			lastAssign = time.Now()
			if err := s.assign(leaseCtx); err != nil {
				var fatal *Error
				if errors.As(err, &fatal) {
					s.endSession(fatal)
					return
				}
			}
		}
		s.releaseDrained()
		timer.Reset(max(time.Until(lastAssign.Add(dur/4)), 0))
	}
}

// addHold makes partition p held under ls. The caller holds mu.
func (s *session[T, K]) addHold(p int, ls *lease) *hold {
	h := newHold(s.sessionCtx, p, ls)
	s.holds[p] = h
	s.r.stats.partitions.Add(1)
	s.r.stats.holding.Store(true)
	return h
}

// removeHold ends h: it is no longer the partition's hold, its handlers' context is
// cancelled with cause, and its items waiting for their fire time are released. Its items
// in lanes are released as they come up, with their executions' items behind them; those in
// handlers are acked or released when they return. The caller holds mu.
func (s *session[T, K]) removeHold(h *hold, cause error) {
	if s.holds[h.part] != h {
		return
	}
	delete(s.holds, h.part)
	s.r.book.drop(h.part)
	h.state = holdEnded
	h.stop(time.Now())
	h.cancel(cause)
	s.dropSoon(h)
	s.releaseQueued(h)
	s.hurrySettling(h)
	s.r.stats.partitions.Add(-1)
	s.r.stats.holding.Store(len(s.holds) > 0)
}

// dropLost drops the holds whose lease ran out unrenewed.
func (s *session[T, K]) dropLost() {
	s.mu.Lock()
	var lost []*hold
	for _, h := range s.holds {
		if h.lease.expired() {
			lost = append(lost, h)
		}
	}
	s.mu.Unlock()
	for _, h := range lost {
		s.lose(h, errLeaseLost)
	}
}

// loseLease drops the hold of ls, if the session still has one.
func (s *session[T, K]) loseLease(ls *lease, cause error) {
	s.mu.Lock()
	var h *hold
	for _, held := range s.holds {
		if held.lease == ls {
			h = held
		}
	}
	s.mu.Unlock()
	if h != nil {
		s.lose(h, cause)
	}
}

// lose drops h, whose lease was lost: fenced, or run out unrenewed.
func (s *session[T, K]) lose(h *hold, cause error) {
	s.mu.Lock()
	if s.holds[h.part] != h {
		s.mu.Unlock()
		return
	}
	// It stopped handing items out when its lease stopped being live, if that was earlier.
	if ls := h.lease; ls != nil {
		if end := ls.liveUntil(); end.Before(time.Now()) {
			h.stop(end)
		}
		s.lost[h.part] = ls.claimedAt
	}
	s.removeHold(h, cause)
	s.mu.Unlock()
	s.r.stats.leasesLost.Add(1)
	if log := s.r.opts.Logger; log != nil {
		log.Warn("relay: lease lost: this relay no longer delivers the partition; its handlers' context is cancelled, "+
			"what it left pending is delivered by the partition's next holder (this relay claims it again at its next look "+
			"if it is still its share); if this repeats, the lease server answers too slowly for LeaseDuration: raise "+
			"LeaseDuration, or give the relay a lease store of its own",
			"key", h.lease.key, "partition", h.part, "cause", cause, "lease_duration", s.r.opts.LeaseDuration,
			"last_renewal", h.lease.lastRoundTrip())
	}
	s.r.opts.OnPartition(PartitionEvent{Partition: h.part, Held: false, At: h.stoppedAt, Local: h.stoppedAt})
}

// register claims the relay's member lease, when it holds none, under the fingerprint that
// names its partitioning: the relays of a lease key agree on it.
func (s *session[T, K]) register(leaseCtx context.Context) (*lease, error) {
	r := s.r
	s.mu.Lock()
	member := s.member
	s.mu.Unlock()
	if member != nil {
		return member, nil
	}
	m, err := r.lease.claimAs(leaseCtx, r.memberKey(), r.memberFingerprint())
	if err != nil {
		if !errors.As(err, new(*Error)) && leaseCtx.Err() == nil {
			r.opts.OnError(&Error{Op: OpClaim, Item: r.memberKey(), Err: err})
		}
		return nil, err
	}
	if m == nil {
		return nil, nil // held by another relay of the same name: none, as names are random
	}
	s.mu.Lock()
	s.member = m
	s.mu.Unlock()
	poke(s.renewWake)
	return m, nil
}

// members lists the live relays of the lease key that partition as this one does, this one
// included, in name order. A live relay registered with another number of partitions has
// not agreed (agree refuses it before it claims anything) or is of an earlier version: it is
// reported, and left out of the share.
func (s *session[T, K]) members(leaseCtx context.Context) ([]string, error) {
	r := s.r
	recs, err := r.opts.Lease.List(leaseCtx, r.membersPrefix(), 0)
	if err != nil {
		if leaseCtx.Err() == nil {
			r.opts.OnError(&Error{Op: OpClaim, Item: r.membersPrefix(), Err: err})
		}
		return nil, err
	}
	members := []string{r.member}
	for _, rec := range recs {
		id := strings.TrimPrefix(rec.Key, r.membersPrefix())
		if rec.Lapsed || id == r.member || rec.State != idem.Claimed {
			continue
		}
		if rec.Fingerprint != r.memberFingerprint() {
			r.opts.OnError(&Error{Op: OpClaim, Item: rec.Key, Err: fmt.Errorf(
				"%w: this relay has %d partitions, relay %s has %s (a store that is not an execstore.Partitioned has 1; a relay of an earlier version says none): it is left out of the share",
				ErrPartitionsDisagree, r.parts, id, partitionsOf(rec.Fingerprint))})
			continue
		}
		members = append(members, id)
	}
	slices.Sort(members)
	return members, nil
}

// partitioningRetention is how long the record that fixes the lease key's number of
// partitions is kept: for good.
const partitioningRetention = 100 * 365 * 24 * time.Hour

// agree settles the number of partitions the relays of the lease key share, before the
// relay claims anything: the record under leases.PartitioningKey is written once, by the
// first relay whose claim of it gets a token, with the relay's member fingerprint, and
// completed for good. A relay agrees when the completed record names its own number. It
// returns an *Error matching ErrPartitionsDisagree when the record names another (a record
// claimed or completed with another fingerprint is refused by the lease store), and false
// with no error while the record is claimed and not yet completed, or its writer's
// complete failed: the relay claims nothing until a later look finds it completed. No
// timestamps are compared: of any number of concurrent claims at most one gets the token,
// and a completed record never changes, so every relay reads the same number.
func (s *session[T, K]) agree(leaseCtx context.Context) (bool, error) {
	r := s.r
	s.mu.Lock()
	agreed := s.agreed
	s.mu.Unlock()
	if agreed {
		return true, nil
	}
	key := leases.PartitioningKey(r.opts.LeaseKey)
	c, err := r.opts.Lease.ClaimAs(leaseCtx, key, r.memberFingerprint(), 1, r.opts.LeaseDuration, r.member)
	switch {
	case leaseCtx.Err() != nil:
		return false, leaseCtx.Err()
	case errors.Is(err, idem.ErrFingerprintMismatch):
		other := "another number"
		if c.Record != nil {
			other = partitionsOf(c.Record.Fingerprint)
		}
		return false, &Error{Op: OpClaim, Item: key, Err: fmt.Errorf(
			"%w: this relay has %d partitions, lease key %q has %s (a store that is not an execstore.Partitioned has 1); "+
				"open every store of a database with the same Partitions, give relays of different stores different lease keys, "+
				"and use a new lease key to change the number", ErrPartitionsDisagree, r.parts, r.opts.LeaseKey, other)}
	case errors.Is(err, execstore.ErrClosed), errors.Is(err, execstore.ErrInvalid):
		return false, &Error{Op: OpClaim, Item: key, Err: err}
	case err != nil:
		r.opts.OnError(&Error{Op: OpClaim, Item: key, Err: err})
		return false, err
	case c.Held():
		done, err := r.opts.Lease.Complete(leaseCtx, key, c.Token,
			idem.Response{Status: 200, Body: []byte(strconv.Itoa(r.parts))}, partitioningRetention)
		if err != nil || !done {
			if err != nil && leaseCtx.Err() == nil {
				r.opts.OnError(&Error{Op: OpClaim, Item: key, Err: err})
			}
			return false, nil // a later look reads what the record became
		}
	case c.Outcome == idem.AlreadyCompleted:
	default: // claimed with this relay's fingerprint, not yet completed: its writer completes it
		return false, nil
	}
	s.mu.Lock()
	s.agreed = true
	s.mu.Unlock()
	return true, nil
}

// assign registers the relay, works out the partitions it wants, hands over those it holds
// and does not want, and claims those it wants and does not hold. A store that is not
// partitioned has one partition, which every relay wants: the first claim wins it.
func (s *session[T, K]) assign(leaseCtx context.Context) error {
	r := s.r
	if ok, err := s.agree(leaseCtx); !ok {
		return err
	}
	if m, err := s.register(leaseCtx); m == nil {
		return err
	}
	members, err := s.members(leaseCtx)
	if err != nil {
		return err
	}
	wanted := map[int]bool{}
	if r.partitioned() {
		me := slices.Index(members, r.member)
		for p := range r.parts {
			if p%len(members) == me {
				wanted[p] = true
			}
		}
	} else {
		wanted[0] = true
	}

	now := time.Now()
	s.mu.Lock()
	var missing []int
	for p := range wanted {
		if s.claimable(p) {
			missing = append(missing, p)
		}
	}
	for p, h := range s.holds {
		if !wanted[p] && h.state == holdActive {
			h.state = holdDraining
			h.stop(now)
			s.dropSoon(h)
			s.releaseQueued(h)
			s.hurrySettling(h)
			s.left(h)
		}
	}
	stopping, late := s.stopping, s.claimsWait()
	s.mu.Unlock()
	if stopping || len(missing) == 0 {
		return nil
	}
	s.mu.Lock()
	wait := late && !s.claimsWaited
	s.claimsWaited = wait
	s.mu.Unlock()
	if wait {
		// The leases held come first: a claim now would queue ahead of their renewal. It
		// waits one look only, so that a relay whose renewals are always slow still claims.
		if log := r.opts.Logger; log != nil {
			log.Info("relay: claims wait: this relay's lease renewal is late or failed; it claims its share at its next look",
				"partitions_wanted", len(missing), "lease_duration", r.opts.LeaseDuration)
		}
		return nil
	}
	// Claim only what no live holder has: one read spares the claims bound to fail. It also
	// tells a lapsed lease of this relay's own from another's.
	recs, err := r.opts.Lease.List(leaseCtx, r.leasesPrefix(), 0)
	if err != nil {
		if leaseCtx.Err() == nil {
			r.opts.OnError(&Error{Op: OpClaim, Item: r.leasesPrefix(), Err: err})
		}
		return err
	}
	held := map[string]bool{}
	lapsedAt := map[string]time.Time{}
	for _, rec := range recs {
		switch {
		case rec.State == idem.Claimed && !rec.Lapsed && rec.Fingerprint == leaseFingerprint:
			held[rec.Key] = true // by a live relay; anything else, the claim tells
		case rec.State == idem.Claimed && rec.Lapsed:
			lapsedAt[rec.Key] = rec.ClaimedAt
		}
	}
	missing = slices.DeleteFunc(missing, func(p int) bool { return held[r.partitionKey(p)] })
	slices.Sort(missing)
	var mu sync.Mutex
	var fatal error
	got := 0
	fanOut(len(missing), claimFanOut, func(i int) {
		p := missing[i]
		ls, err := r.lease.claim(leaseCtx, r.partitionKey(p))
		switch {
		case errors.As(err, new(*Error)):
			mu.Lock()
			fatal = err
			mu.Unlock()
		case err != nil:
			if leaseCtx.Err() == nil {
				r.opts.OnError(&Error{Op: OpClaim, Item: r.partitionKey(p), Err: err})
			}
		case ls != nil && s.took(p, ls, lapsedAt[ls.key]):
			mu.Lock()
			got++
			mu.Unlock()
		}
	})
	if got > 0 {
		poke(s.rescan) // the partitions taken are scanned at once
	}
	return fatal
}

// claimable reports whether partition p may be claimed: the session does not hold it. An
// earlier hold's items still in flight keep their order by their lanes: an item that leaves
// flight unacked takes its execution's items queued behind it along. The caller holds mu.
func (s *session[T, K]) claimable(p int) bool { return s.holds[p] == nil }

// took makes partition p held under ls, just claimed, and reports whether it did; when the
// session is stopping, or the lease is no longer live, it releases the lease at once instead. prev is when the lapsed lease it reclaimed was
// claimed, if it was one: a lease of this relay's own that ran out is a re-take, not a
// take-over. Another relay claims a lapsed lease only after it ran out, at least
// LeaseDuration after its claim, so a lapsed lease claimed within LeaseDuration/2 of this
// relay's own was this relay's.
func (s *session[T, K]) took(p int, ls *lease, prev time.Time) bool {
	r := s.r
	local := time.Now() // the claim's answer arrived: from now on the items may be handed out
	s.mu.Lock()
	// A claim answered after its lease stopped being live hands nothing out: it is given
	// back at once, and claimed again at a later look.
	if s.stopping || !s.claimable(p) || !ls.live() {
		s.mu.Unlock()
		releaseCtx, cancel := s.releaseCtx()
		r.lease.release(releaseCtx, ls)
		cancel()
		return false
	}
	own, ok := s.lost[p]
	reTake := ls.takeOver && ok && !prev.IsZero() && prev.Sub(own).Abs() < r.opts.LeaseDuration/2
	delete(s.lost, p)
	s.addHold(p, ls)
	s.wideOwed = true
	s.mu.Unlock()
	poke(s.renewWake) // a claim answered late is owed its renewal at once
	r.stats.leases.Add(1)
	switch {
	case reTake:
		r.stats.reTakes.Add(1)
		if log := r.opts.Logger; log != nil {
			log.Info("relay: lease taken again after this relay's own lease of it ran out: the partition is delivered here again",
				"key", ls.key, "partition", p)
		}
	case ls.takeOver:
		r.stats.takeOvers.Add(1)
		if log := r.opts.Logger; log != nil {
			log.Info("relay: lease taken over from a holder whose lease had lapsed: the partition's pending items are delivered here from now on",
				"key", ls.key, "partition", p)
		}
	}
	r.opts.OnPartition(PartitionEvent{Partition: p, Held: true, TakeOver: ls.takeOver && !reTake, ReTake: reTake,
		At: ls.claimedAt, Local: local})
	return true
}

// releaseDrained releases the leases of the draining holds with nothing in flight, and
// cancels the handlers of those that have drained for LeaseDuration (drainBound).
func (s *session[T, K]) releaseDrained() {
	s.mu.Lock()
	var done []*hold
	now := time.Now()
	for _, h := range s.holds {
		switch {
		case h.state != holdDraining:
		case h.inFlight == 0:
			done = append(done, h)
			s.removeHold(h, errHandedOver)
		case now.Sub(h.stoppedAt) >= s.drainBound():
			h.cancel(errHandedOver) // what they leave unfinished is released, pending
		}
	}
	s.mu.Unlock()
	if len(done) == 0 {
		return
	}
	releaseCtx, cancel := s.releaseCtx()
	defer cancel()
	fanOut(len(done), claimFanOut, func(i int) { s.giveUp(releaseCtx, done[i]) })
}

// drainBound is how long a hand-over waits for the handlers of the partition's items to
// return by themselves before it cancels their context: LeaseDuration. The lease is kept,
// and renewed, until they returned, whatever they do with their context.
func (s *session[T, K]) drainBound() time.Duration { return s.r.opts.LeaseDuration }

// releaseAll releases every lease the session holds, once it stopped: its handlers are done
// and what they finished is acked.
func (s *session[T, K]) releaseAll() {
	releaseCtx, cancel := s.releaseCtx()
	defer cancel()
	s.mu.Lock()
	holds := make([]*hold, 0, len(s.holds))
	for _, h := range s.holds {
		holds = append(holds, h)
		s.removeHold(h, errStopped)
	}
	member := s.member
	s.member = nil
	s.mu.Unlock()
	fanOut(len(holds), claimFanOut, func(i int) { s.giveUp(releaseCtx, holds[i]) })
	if member != nil {
		s.r.lease.release(releaseCtx, member)
	}
}

// giveUp releases h's lease and says so.
func (s *session[T, K]) giveUp(releaseCtx context.Context, h *hold) {
	if h.lease != nil {
		s.r.lease.release(releaseCtx, h.lease)
	}
	s.r.opts.OnPartition(PartitionEvent{Partition: h.part, Held: false, At: h.stoppedAt, Local: h.stoppedAt})
}

// fanOut runs f(0)…f(n-1), at most limit at once, and returns when all have.
func fanOut(n, limit int, f func(i int)) {
	p := pool.New().WithMaxGoroutines(limit)
	for i := range n {
		p.Go(func() { f(i) })
	}
	p.Wait()
}

// dropSoon releases the items taken under h that wait for their fire time or its
// confirmation. The caller holds mu.
func (s *session[T, K]) dropSoon(h *hold) {
	for _, st := range []itemState{waiting, unconfirmed} {
		s.fl.each(st, func(e *entry[T, K]) {
			if e.hold == h {
				s.fl.release(e)
			}
		})
	}
}
