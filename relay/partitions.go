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

// claimFanOut bounds the claims in flight at once. On a lease server that runs one write at
// a time (the embedded server, per database), every claim queued ahead of a renewal delays it.
const claimFanOut = 4

// partitionsOf is the number of partitions a member fingerprint names, or "none".
func partitionsOf(fingerprint string) string {
	if n, ok := leases.PartitionsOfMember(fingerprint); ok {
		return strconv.Itoa(n)
	}
	return "none"
}

// shareRuleOf names the share rule of a member fingerprint, for an error.
func shareRuleOf(fingerprint string) string {
	if rule := leases.ShareRuleOfMember(fingerprint); rule != "" {
		return strconv.Quote(rule)
	}
	return "the rule of earlier versions, the (p mod n)-th of n relays"
}

// memberFingerprint names the relay's number of partitions and share rule
// (leases.MemberFingerprint).
func (r *runner[T, K]) memberFingerprint() string { return leases.MemberFingerprint(r.parts) }

// partitionKey is partition p's lease key: Options.LeaseKey when not partitioned.
func (r *runner[T, K]) partitionKey(p int) string {
	if !r.partitioned() {
		return r.opts.LeaseKey
	}
	return leases.PartitionKey(r.opts.LeaseKey, p)
}

// manage claims, hands over, renews and drops the session's partitions until leaseCtx ends.
// Without a lease store the session holds every partition from its start.
func (s *session[T, K]) manage(leaseCtx context.Context) {
	if !s.r.leases() {
		return
	}
	// Apart from the claims, so that a slow round of claims never holds up a renewal.
	var wg sync.WaitGroup
	wg.Go(func() { s.keepRenewing(leaseCtx) })
	s.keepAssigning(leaseCtx)
	wg.Wait()
}

// keepAssigning runs assign every LeaseDuration/4, and releaseDrained, until leaseCtx ends.
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
			var fatal *Error
			if errors.As(s.assign(leaseCtx), &fatal) {
				s.endSession(fatal)
				return
			}
		}
		s.releaseDrained()
		timer.Reset(max(time.Until(lastAssign.Add(dur/4)), 0))
	}
}

// addHold makes partition p held under ls. The caller holds mu.
func (s *session[T, K]) addHold(p int, ls *lease) *hold {
	h := newHold(s.sessionCtx, p, ls, &s.gens)
	s.holds[p] = h
	s.r.stats.partitions.Add(1)
	s.r.stats.holding.Store(true)
	return h
}

// removeHold ends h, its handlers' context cancelled with cause. The caller holds mu.
func (s *session[T, K]) removeHold(h *hold, cause error) {
	if s.holds[h.part] != h {
		return
	}
	delete(s.holds, h.part)
	s.r.book.drop(h.part)
	s.stopHanding(h, holdEnded, time.Now(), cause)
	s.r.stats.partitions.Add(-1)
	s.r.stats.holding.Store(len(s.holds) > 0)
}

// loseWhere drops, with cause, the holds whose lease was lost: those lost reports.
func (s *session[T, K]) loseWhere(lost func(ls *lease) bool, cause error) {
	s.mu.Lock()
	var hs []*hold
	for _, h := range s.holds {
		if lost(h.lease) {
			hs = append(hs, h)
		}
	}
	s.mu.Unlock()
	for _, h := range hs {
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
	if ls := h.lease; ls != nil {
		s.lost[h.part] = ls.claimedAt
	}
	// The sole lease is counted and logged with its last hold (h is still held here). The
	// loss is counted before Stats says the partition is no longer held.
	shared := s.r.offer != nil && len(s.holds) > 1
	if !shared {
		s.r.stats.leasesLost.Add(1)
	}
	// It stopped handing items out when its lease stopped being live, if that was earlier
	// (hold.stop).
	s.removeHold(h, cause)
	s.mu.Unlock()
	s.r.opts.OnPartition(PartitionEvent{Partition: h.part, Held: false, At: h.stoppedAt, Local: h.stoppedAt})
	if shared {
		return
	}
	s.r.opts.Logger.Warn("relay: lease lost: this relay no longer delivers the partition; its handlers' context is cancelled, "+
		"what it left pending is delivered by the partition's next holder (this relay claims it again at its next look "+
		"if it is still its share); if this repeats, the lease server answers too slowly for LeaseDuration: raise "+
		"LeaseDuration, or give the relay a lease store of its own",
		"key", h.lease.key, "partition", h.part, "cause", cause, "lease_duration", s.r.opts.LeaseDuration,
		"last_renewal", h.lease.lastRoundTrip())
}

// register claims the relay's member lease, when it holds none.
func (s *session[T, K]) register(leaseCtx context.Context) (*lease, error) {
	r := s.r
	s.mu.Lock()
	member := s.member
	s.mu.Unlock()
	if member != nil {
		return member, nil
	}
	key := leases.MemberKey(r.opts.LeaseKey, r.member)
	m, err := r.lease.claimAs(leaseCtx, key, r.memberFingerprint())
	if err != nil {
		if !errors.As(err, new(*Error)) && leaseCtx.Err() == nil {
			r.opts.OnError(&Error{Op: OpClaim, Item: key, Err: err})
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

// members lists, in name order, the live relays of the lease key with this one's number of
// partitions. One with another number is reported and left out of the share.
func (s *session[T, K]) members(leaseCtx context.Context) ([]string, error) {
	r := s.r
	prefix := leases.MembersPrefix(r.opts.LeaseKey)
	recs, err := r.opts.Lease.List(leaseCtx, prefix, 0)
	if err != nil {
		if leaseCtx.Err() == nil {
			r.opts.OnError(&Error{Op: OpClaim, Item: prefix, Err: err})
		}
		return nil, err
	}
	members := []string{r.member}
	for _, rec := range recs {
		id := strings.TrimPrefix(rec.Key, prefix)
		if rec.Lapsed || id == r.member || rec.State != idem.Claimed {
			continue
		}
		if rec.Fingerprint != r.memberFingerprint() {
			err := fmt.Errorf(
				"%w: this relay has %d partitions, relay %s has %s (a store that is not an execstore.Partitioned has 1; a relay of an earlier version says none): it is left out of the share",
				ErrPartitionsDisagree, r.parts, id, partitionsOf(rec.Fingerprint))
			if n, ok := leases.PartitionsOfMember(rec.Fingerprint); ok && n == r.parts {
				err = fmt.Errorf("%w: relay %s shares the %d partitions by %s, this relay by %q: it is left out of the share, "+
					"and until the relays of the lease key follow one rule each side shares every partition among its own",
					ErrPartitionsDisagree, id, n, shareRuleOf(rec.Fingerprint), leases.ShareRule)
			}
			r.opts.OnError(&Error{Op: OpClaim, Item: rec.Key, Err: err})
			continue
		}
		members = append(members, id)
	}
	slices.Sort(members)
	return members, nil
}

// partitioningRetention keeps the record that fixes the number of partitions for good.
const partitioningRetention = 100 * 365 * 24 * time.Hour

// agree settles the number of partitions the relays of the lease key share (see the package
// doc). It returns false with no error while the record is not yet completed.
func (s *session[T, K]) agree(leaseCtx context.Context) (bool, error) {
	r := s.r
	s.mu.Lock()
	agreed := s.agreed
	s.mu.Unlock()
	if agreed {
		return true, nil
	}
	key := leases.PartitioningKey(r.opts.LeaseKey)
	c, err := r.opts.Lease.ClaimAs(leaseCtx, key, leases.PartitioningFingerprint(r.parts), 1, r.opts.LeaseDuration, r.member)
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

// assign registers the relay, hands over the partitions it no longer wants, and claims
// those it wants (see the package doc).
func (s *session[T, K]) assign(leaseCtx context.Context) error {
	r := s.r
	if r.offer != nil {
		return s.assignSole(leaseCtx)
	}
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
	wanted := map[int]bool{0: true}
	if r.partitioned() {
		wanted = shareOf(members, r.parts, r.member)
	}

	now := time.Now()
	s.mu.Lock()
	var missing []int
	for p := range wanted {
		if s.holds[p] == nil {
			missing = append(missing, p)
		}
	}
	for p, h := range s.holds {
		if !wanted[p] && h.state == holdActive {
			s.stopHanding(h, holdDraining, now, nil)
			s.left(h)
		}
	}
	if s.stopping || len(missing) == 0 {
		s.mu.Unlock()
		return nil
	}
	wait := s.claimsWait() && !s.claimsWaited
	s.claimsWaited = wait
	s.mu.Unlock()
	if wait {
		// The leases held come first: a claim now would queue ahead of their renewal. It
		// waits one look only, so that a relay whose renewals are always slow still claims.
		r.opts.Logger.Info("relay: claims wait: this relay's lease renewal is late or failed; it claims its share at its next look",
			"partitions_wanted", len(missing), "lease_duration", r.opts.LeaseDuration)
		return nil
	}
	// Claim only what no live holder has: one read spares the claims bound to fail. It also
	// tells a lapsed lease of this relay's own from another's.
	prefix := r.opts.LeaseKey
	if r.partitioned() {
		prefix = leases.PartitionsPrefix(r.opts.LeaseKey)
	}
	recs, err := r.opts.Lease.List(leaseCtx, prefix, 0)
	if err != nil {
		if leaseCtx.Err() == nil {
			r.opts.OnError(&Error{Op: OpClaim, Item: prefix, Err: err})
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
		ls, err := r.lease.claimAs(leaseCtx, r.partitionKey(p), leaseFingerprint)
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

// took makes partition p held under ls, just claimed, or releases ls, and reports which.
// prev is when the lapsed lease it reclaimed was claimed, if any: another relay claims a
// lapsed lease at least LeaseDuration after its claim, so one claimed within LeaseDuration/2
// of this relay's own lost lease was this relay's (a re-take).
func (s *session[T, K]) took(p int, ls *lease, prev time.Time) bool {
	r := s.r
	local := time.Now() // the claim's answer arrived: from now on the items may be handed out
	s.mu.Lock()
	// A claim answered after its lease stopped being live is given back at once.
	if s.stopping || s.holds[p] != nil || !ls.live() {
		s.mu.Unlock()
		releaseCtx, cancel := s.releaseCtx()
		r.lease.release(releaseCtx, ls)
		cancel()
		return false
	}
	own, ok := s.lost[p]
	reTake := ls.takeOver && ok && !prev.IsZero() && prev.Sub(own).Abs() < r.opts.LeaseDuration/2
	delete(s.lost, p)
	r.stats.leases.Add(1) // counted before Stats says the partition is held
	switch {
	case reTake:
		r.stats.reTakes.Add(1)
	case ls.takeOver:
		r.stats.takeOvers.Add(1)
	}
	s.addHold(p, ls)
	s.wideOwed = true
	s.mu.Unlock()
	poke(s.renewWake) // a claim answered late is owed its renewal at once
	switch {
	case reTake:
		r.opts.Logger.Info("relay: lease taken again after this relay's own lease of it ran out: the partition is delivered here again",
			"key", ls.key, "partition", p)
	case ls.takeOver:
		r.opts.Logger.Info("relay: lease taken over from a holder whose lease had lapsed: the partition's pending items are delivered here from now on",
			"key", ls.key, "partition", p)
	}
	r.opts.OnPartition(PartitionEvent{Partition: p, Held: true, TakeOver: ls.takeOver && !reTake, ReTake: reTake,
		At: ls.claimedAt, Local: local})
	return true
}

// releaseDrained releases the leases of the draining holds with nothing in flight, and
// cancels the handlers of those draining for LeaseDuration (the lease is kept until they
// returned).
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
		case now.Sub(h.stoppedAt) >= s.r.opts.LeaseDuration:
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

// releaseAll releases every lease, once the handlers are done and their items settled.
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
	if s.r.offer != nil && len(holds) > 0 { // every hold under the one lease
		s.r.lease.release(releaseCtx, holds[0].lease)
		for _, h := range holds {
			h.lease = nil
		}
	}
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

// stopHanding moves h to st, stopped at at: its handlers' context is cancelled with cause
// (unless nil), its items not yet in a handler are released, its writes hurried. The caller
// holds mu.
func (s *session[T, K]) stopHanding(h *hold, st holdState, at time.Time, cause error) {
	h.state = st
	h.stop(at)
	if cause != nil {
		h.cancel(cause)
	}
	for _, soon := range []itemState{waiting, unconfirmed} {
		s.fl.each(soon, func(e *entry[T, K]) {
			if e.hold == h {
				s.fl.release(e)
			}
		})
	}
	s.releaseQueued(h)
	s.hurrySettling(h)
}
