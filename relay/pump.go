package relay

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
)

// kind is what a runner carries, outbox entries (relay.go) or due timers (sweeper.go): how
// to scan the store for them, name them, route them and ack them. Everything else is shared.
type kind[T any, K comparable] interface {
	// key is the item's identity: two scans return the same item with the same key.
	key(item T) K
	// lane is the execution the item belongs to: its items are delivered one at a time, in
	// scan order, and held back together after a failure.
	lane(item T) string
	// source is the execution whose document holds the item: the item is in its partition.
	source(item T) string
	// chained reports whether items are kept in commit order, each source's (outbox
	// entries), so that a commit may be handed over only when every earlier item of its
	// source is known. Timers fire by fire time, whatever commit armed them.
	chained() bool
	// version is the version of the commit that wrote the item, 0 when unknown.
	version(item T) int64
	// describe names the item in an *Error.
	describe(item T) string
	// dueAt is when the item may be handed out: zero for at once.
	dueAt(item T) time.Time
	// waiting reports whether the item counts in the backlog at now (an entry always, a
	// timer once due), and since when it has waited: an entry's commit time (zero when it
	// records none), a timer's fire time.
	waiting(item T, now time.Time) (since time.Time, ok bool)
	// scan reads up to limit items of the partitions (all of them when the store is not
	// partitioned) that are due by now+ahead, oldest first.
	scan(ctx context.Context, parts []int, now time.Time, ahead time.Duration, limit int) (scanned[T], error)
	// targeted reports whether the store reads named sources alone (execstore.Targeted).
	targeted() bool
	// read is scan restricted to the sources ids, read by their ids alone; only when
	// targeted.
	read(ctx context.Context, ids []string, now time.Time, ahead time.Duration, limit int) (scanned[T], error)
	// handed returns the items c wrote that are due by horizon, in the order a scan returns
	// them.
	handed(c *wake.Committed, horizon time.Time) []T
	// gone reports whether c removed item from the store (a timer cancelled or re-armed).
	gone(c *wake.Committed, item T) bool
	// fired returns the context the item's handler is given, and the fired timer it holds
	// (nil for none): a commit made with it may remove the item in its own write.
	fired(ctx context.Context, item T) (context.Context, *wake.FiredTimer)
	// settle acks items whose handler returned nil; errs[i] is items[i]'s failure (errs nil:
	// none failed).
	settle(ctx context.Context, items []T) (errs []error)
	// ref names the item for a DeadLetters store.
	ref(item T) execstore.ItemRef
	// attempts is the number of failed deliveries the store recorded of the item.
	attempts(item T) int
}

// scanned is one scan's result.
type scanned[T any] struct {
	items []T // in the store's order
	// full reports that there may be more than the scan returned: scan again as soon as
	// there is room.
	full bool
}

// lookAhead is how far ahead of now a scan reads: twice the poll interval, so that every
// item due in the next poll interval was read by a scan before it is due, and waits in
// memory for its fire time.
func (s *session[T, K]) lookAhead() time.Duration { return 2 * s.r.opts.PollInterval }

// dispatch is the session's wake loop, on the run's goroutine: it scans the partitions held
// and routes what the ledger admits to lanes, until stop is closed or the session ends. A
// scan is owed at the start, after a partition is taken, after a commit of this process that
// could not be handed over, after PollInterval, after a full scan, and when an execution's
// retry or a failed scan's back-off is due. It is sent once at most Batch items are in
// flight (so scans overlap deliveries but never pile them up), while a partition is held,
// and, unless it follows a full scan, no sooner than ScanGap after the last one. Items
// waiting for their fire time are routed when it comes.
func (s *session[T, K]) dispatch(stop <-chan struct{}) {
	o := &s.r.opts
	poll := time.NewTimer(o.PollInterval)
	defer poll.Stop()
	alarm := time.NewTimer(time.Hour)
	defer alarm.Stop()
	scanRetry := newBackoff(o.RetryMin, o.RetryMax)
	var (
		retryScan time.Time // when a failed scan is retried; zero for none
		owed      = true
		wide      = true    // the scan owed reads the partitions, not only the sources targets names
		followUp  bool      // the scan owed follows a full one: no ScanGap
		lastScan  time.Time // when the last scan was sent
	)
	for {
		s.mu.Lock()
		s.fireDue()
		if s.wideOwed {
			wide, s.wideOwed = true, false
		}
		s.mu.Unlock()
		gapLeft := o.ScanGap - time.Since(lastScan)
		if followUp {
			gapLeft = 0
		}
		var parts []int
		var holds map[int]*hold
		var targets map[string]bool // the sources a targeted read reads instead (nil: scan the partitions)
		if owed && gapLeft <= 0 && s.room() {
			// Only now: the loop runs each time an item leaves flight.
			s.mu.Lock()
			parts, holds = s.scannable()
			if !wide && len(parts) > 0 {
				targets = s.targets(holds)
			}
			s.mu.Unlock()
		}
		if len(parts) > 0 {
			owed, followUp = false, false
			now, started := o.Clock(), time.Now()
			lastScan = started
			res, capped, err := s.scan(parts, holds, targets, now)
			if targets == nil {
				poll.Reset(max(0, o.PollInterval-time.Since(started)))
			}
			switch {
			case err == nil:
				scanRetry.Reset()
				retryScan = time.Time{}
				owed = res.full || capped
				followUp = owed
				wide = owed
			case errors.Is(err, execstore.ErrClosed):
				s.endSession(&Error{Op: OpScan, Err: err})
			default:
				retryScan = time.Now().Add(scanRetry.NextBackOff())
				wide = true
			}
			continue // a full scan is followed by the next at once, if there is room
		}
		wait, scanAt := s.untilAlarm(retryScan, owed)
		if owed && gapLeft > 0 {
			wait = min(wait, gapLeft) // the scan owed waits for the gap
		}
		// A scan owed may also wait for room or a scannable partition, which no alarm brings:
		// an item leaving flight, a partition taken or the next poll does; the fire times and
		// retries still need their alarms.
		alarm.Reset(wait)
		select {
		case <-stop:
			return
		case <-s.sessionCtx.Done():
			return
		case <-s.rescan:
			owed = true
		case <-poll.C:
			// Re-armed at once: a poll that finds no partition to scan (none held, or a
			// lease's renewal late) is not the last one.
			owed, wide = true, true
			poll.Reset(o.PollInterval)
		case <-alarm.C:
			if !scanAt.IsZero() && !time.Now().Before(scanAt) {
				owed = true
			}
			if !retryScan.IsZero() && !time.Now().Before(retryScan) {
				// The failed scan's retry is owed now; its alarm is spent. Kept, it would
				// ring at once for as long as no partition may be scanned.
				retryScan = time.Time{}
			}
		case <-s.progress:
		case <-s.soonChanged:
		}
	}
}

// scannable returns the partitions a scan may read now, in order, with their holds. The
// caller holds mu.
func (s *session[T, K]) scannable() ([]int, map[int]*hold) {
	parts := make([]int, 0, len(s.holds))
	holds := make(map[int]*hold, len(s.holds))
	for p, h := range s.holds {
		if s.handing(h) {
			parts = append(parts, p)
			holds[p] = h
		}
	}
	slices.Sort(parts)
	return parts, holds
}

// room reports whether a scan may be sent: at most Batch items pace (see pacing), not
// counting the items waiting for their confirmation. Those need no lane, and only a scan
// sent after their fire time lets them go: counted, more than Batch of them would hold
// back the one scan that confirms them, for ever.
func (s *session[T, K]) room() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pacing()-s.fl.count[unconfirmed] <= s.r.opts.Batch
}

// pacing is the number of items in flight that pace the scans and hand-overs: those settling
// (handled, waiting for their ack or failure record) count only beyond 2×Batch of them. A
// store may hold an ack a while (aio carries it in its source's next commit), and the items
// it holds need no lane: counted in full, they would hold delivery back for as long. So at
// most 4×Batch items are in flight at once. The caller holds mu.
func (s *session[T, K]) pacing() int {
	return len(s.fl.items) - min(s.fl.settling(), 2*s.r.opts.Batch)
}

// untilAlarm is how long until the earliest of a failed scan's retry, an execution's retry
// and the next fire time waiting (an hour when there is none: the poll comes first), and
// when the earliest scan it asks for is due (zero for none). When a scan is owed already,
// the executions' retries ask for nothing more: it waits for the gap or room only, and
// once sent it is the scan their retries owe.
func (s *session[T, K]) untilAlarm(retryScan time.Time, owed bool) (time.Duration, time.Time) {
	now := time.Now()
	scanAt := retryScan
	s.mu.Lock()
	var at time.Time
	var ok bool
	if !owed {
		at, ok = s.fl.retries.next(now)
	}
	fireAt := s.fl.nextFire()
	s.mu.Unlock()
	if ok && (scanAt.IsZero() || at.Before(scanAt)) {
		scanAt = at
	}
	d := time.Hour
	if !scanAt.IsZero() {
		d = min(d, scanAt.Sub(now))
	}
	if !fireAt.IsZero() {
		d = min(d, fireAt.Sub(s.r.opts.Clock()))
	}
	return max(d, 0), scanAt
}

// targets returns the sources a targeted read reads in place of a scan of the partitions of
// holds: every source some of whose items a hold left in the store (soiled, sources.go), and
// every source of an item waiting for its confirmation. That is all a scan owed for anything
// but a poll, a partition taken or a full or failed scan would find. It returns nil, for a
// scan, when the store has no targeted reads, when there is no such source, or when there are
// more than Batch of them. The caller holds mu.
func (s *session[T, K]) targets(holds map[int]*hold) map[string]bool {
	if !s.r.kind.targeted() {
		return nil
	}
	most := min(s.r.opts.Batch, execstore.MaxTargetedIDs)
	set := map[string]bool{}
	for _, h := range holds {
		for src := range h.sources.soiled {
			set[src] = true
		}
		if len(set) > most {
			return nil
		}
	}
	s.fl.each(unconfirmed, func(e *entry[T, K]) {
		if holds[e.hold.part] == e.hold {
			set[s.r.kind.source(e.item)] = true
		}
	})
	if len(set) == 0 || len(set) > most {
		return nil
	}
	return set
}

// scan sends one scan of parts, as of now, and admits its result; capped reports that it
// left items out to keep at most 2×Batch pacing (see pacing). With only, it reads those
// sources alone (see targets). Its limit covers what is in flight and what the last scan held
// back, which the store returns first, plus Batch new items.
func (s *session[T, K]) scan(parts []int, holds map[int]*hold, only map[string]bool, now time.Time) (res scanned[T], capped bool, err error) {
	s.mu.Lock()
	n := s.fl.begin()
	s.fl.retries.scanning(time.Now())
	limit := len(s.fl.items) + s.fl.heldBack + s.r.opts.Batch
	s.mu.Unlock()
	s.r.stats.scans.Add(1)
	if only != nil {
		s.r.stats.targeted.Add(1)
		res, err = s.r.kind.read(s.sessionCtx, slices.Sorted(maps.Keys(only)), now, s.lookAhead(), limit)
	} else {
		res, err = s.r.kind.scan(s.sessionCtx, parts, now, s.lookAhead(), limit)
	}
	if err != nil {
		s.mu.Lock()
		s.fl.finish(n)
		s.mu.Unlock()
		if s.sessionCtx.Err() == nil {
			s.r.stats.scanErrors.Add(1)
			s.r.opts.OnError(&Error{Op: OpScan, Err: err})
		}
		return res, false, err
	}
	return res, s.admit(n, now, holds, only, res), nil
}

// recordBacklog keeps what a scan of the partitions of handing, sent at now, found waiting in
// each (Backlog).
func (s *session[T, K]) recordBacklog(handing map[*hold]bool, res scanned[T], now time.Time) {
	rows := make(map[int]*Backlog, len(handing))
	for h := range handing {
		rows[h.part] = &Backlog{Partition: h.part, Holder: s.r.member, ScannedAt: now, AtLeast: res.full}
	}
	for _, item := range res.items {
		b := rows[s.partOf(item)]
		since, ok := s.r.kind.waiting(item, now)
		if b == nil || !ok {
			continue
		}
		b.Items++
		if !since.IsZero() && (b.Oldest.IsZero() || since.Before(b.Oldest)) {
			b.Oldest = since
		}
	}
	for _, b := range rows {
		s.r.book.record(*b)
	}
}

// admit takes the items of scan n, sent at now (by Options.Clock), in order, until 2×Batch
// items pace (see pacing); it reports whether it stopped there. It admits only the items of the
// holds that are still the partitions' holds as they were when the scan was sent and hand
// items out now: the others learn nothing from it. What it takes, skips and holds back is
// flight.decide's. An item waiting for its confirmation (its fire time came while it waited
// in memory) is confirmed when the scan returns it and was sent at or after its fire time.
// When the scan read every pending item of its partitions, or of the sources only names (a
// targeted read: nil for a scan), it tells each hold's sources (sources.go) what it read,
// and cancels the items waiting for a confirmation that it should have returned and did
// not: a commit cancelled or re-armed them.
func (s *session[T, K]) admit(n uint64, now time.Time, holds map[int]*hold, only map[string]bool, res scanned[T]) (capped bool) {
	k, fl := s.r.kind, s.fl
	s.mu.Lock()
	defer s.mu.Unlock()
	handing := make(map[*hold]bool, len(holds))
	for _, h := range holds {
		if s.handing(h) {
			handing[h] = true
		}
	}
	if only == nil {
		s.recordBacklog(handing, res, now)
	}
	at := time.Now()
	skipped, heldBack, buried := 0, 0, false
	partial := map[string]bool{}           // sources some of whose items this scan held back
	latest := map[*hold]map[string]int64{} // the latest commit of each source whose items it read
	returned := map[K]bool{}               // the items waiting for a confirmation that it returned
	for _, item := range res.items {
		h := holds[s.partOf(item)]
		if !handing[h] {
			continue // the partition changed hands, or is not handed out, since the scan was sent
		}
		src, key, lk := k.source(item), k.key(item), k.lane(item)
		if latest[h] == nil {
			latest[h] = map[string]int64{}
		}
		latest[h][src] = max(latest[h][src], k.version(item))
		if e := fl.items[key]; e != nil && e.state == unconfirmed {
			if !k.dueAt(e.item).After(now) {
				returned[key] = true
				if fl.waits(lk, at) || fl.fence[lk] >= n {
					fl.release(e)
				} else {
					fl.queue(e, at)
					s.started(e)
				}
			}
			continue
		}
		if s.pacing() >= 2*s.r.opts.Batch {
			capped = true
			break
		}
		switch fl.decide(key, lk, n, at) {
		case skipDead:
			buried = true // read revived, maybe: what follows it waits for a later scan
			fallthrough
		case skip:
			skipped++
		case holdBack:
			heldBack++
			partial[src] = true
			h.sources.soil(src, n)
			if fl.failing[lk] == 0 {
				// Owed a scan at its retry time. One held back while a failure of it is
				// being recorded is not: the record's answer asks for the scan, and until
				// then every scan would hold it back again, at once.
				fl.retries.heldBack(lk)
			}
		case hand:
			s.take(h, item, now)
		}
	}
	if !capped && !res.full {
		for h := range handing {
			h.sources.scanned(n, latest[h], partial, only)
		}
		fl.each(unconfirmed, func(e *entry[T, K]) {
			if (only == nil || only[k.source(e.item)]) && handing[e.hold] && !k.dueAt(e.item).After(now) && !returned[e.key] {
				fl.cancel(e)
			}
		})
	}
	fl.heldBack = heldBack
	fl.finish(n)
	s.r.stats.skipped.Add(int64(skipped))
	if buried {
		poke(s.rescan)
	}
	return capped
}
