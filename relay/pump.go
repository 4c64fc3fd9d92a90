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

// kind is what a runner carries, outbox entries (relay.go) or due timers (sweeper.go).
type kind[T any, K comparable] interface {
	key(item T) K         // the item's identity, the same in every scan
	lane(item T) string   // the execution it belongs to: its items go one at a time, in order
	source(item T) string // the execution whose document holds it: its partition's
	// chained: items are kept in each source's commit order (entries, not timers), so a
	// commit is handed over only when every earlier item of its source is known.
	chained() bool
	version(item T) int64   // the version of the commit that wrote it, 0 when unknown
	describe(item T) string // its name in an *Error and a span: ref(item).String()
	dueAt(item T) time.Time // when it may be handed out: zero for at once
	// waiting reports whether the item counts in the backlog at now, and since when.
	waiting(item T, now time.Time) (since time.Time, ok bool)
	// scan reads up to limit items of the partitions that are due by now+ahead, oldest first,
	// leaving out the sources except (sorted; only when excludes).
	scan(ctx context.Context, parts []int, except []string, now time.Time, ahead time.Duration, limit int) (scanned[T], error)
	excludes() bool // the store's scans leave named sources out (execstore.Excluding)
	targeted() bool // the store reads named sources alone (execstore.Targeted)
	// read is scan restricted to the sources ids; only when targeted.
	read(ctx context.Context, ids []string, now time.Time, ahead time.Duration, limit int) (scanned[T], error)
	// handed returns the items c wrote that are due by horizon, in a scan's order.
	handed(c *wake.Committed, horizon time.Time) []T
	// carried returns the items mark m carries, in a scan's order.
	carried(m wake.Mark) []T
	gone(c *wake.Committed, item T) bool // c removed item (a timer cancelled or re-armed)
	// fired returns the handler's context, and the fired timer it holds (nil for none).
	fired(ctx context.Context, item T) (context.Context, *wake.FiredTimer)
	// settle acks items; errs[i] is items[i]'s failure (errs nil: none failed).
	settle(ctx context.Context, items []T) (errs []error)
	ref(item T) execstore.ItemRef // the item for a DeadLetters store
}

// scanned is one scan's result, in the store's order; full: there may be more.
type scanned[T any] struct {
	items []T
	full  bool
}

// lookAhead is how far ahead a scan reads: each item is read before it is due.
func (s *session[T, K]) lookAhead() time.Duration { return 2 * s.r.opts.PollInterval }

// dispatch is the session's wake loop, on the run's goroutine: it sends the scans owed (see
// the package doc) and admits their items, until stop is closed or the session ends.
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
		wide      = true    // the scan owed reads the partitions, not only targets' sources
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
				followUp, wide = owed, owed
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
		// Room or a scannable partition comes with progress, a partition taken or a poll;
		// only the fire times and retries need the alarm.
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
				retryScan = time.Time{} // spent: kept, it would ring at once while nothing may be scanned
			}
		case <-s.progress:
		case <-s.soonChanged:
		}
	}
}

// scannable returns the partitions handed out now, in order, with their holds. The caller
// holds mu.
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

// room reports whether a scan may be sent: at most Batch items pace, the unconfirmed not
// counted (scanPacing).
func (s *session[T, K]) room() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scanPacing() <= s.r.opts.Batch
}

// scanPacing is pacing without the unconfirmed items: those wait for a scan to confirm
// them, and the scan's result may hold other items before them (earlier fire times), so
// counting them would hold back for ever both the scan they need (room) and the taking of
// the items before them (admit), which makes room for them in its next result. The caller
// holds mu.
func (s *session[T, K]) scanPacing() int {
	return s.pacing() - s.fl.count[unconfirmed]
}

// pacing is the number of items in flight that pace the scans and hand-overs: those settling
// count only beyond 2×Batch of them, since a store may hold an ack a while (aio carries it
// in its source's next commit). The caller holds mu.
func (s *session[T, K]) pacing() int {
	return len(s.fl.items) - min(s.fl.settling(), 2*s.r.opts.Batch)
}

// untilAlarm is how long until the next failed scan's retry, execution's retry (unless a
// scan is owed: it is theirs) or fire time, and when the scan it asks for is due.
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

// targets returns the sources a targeted read reads in place of a scan of holds'
// partitions: those soiled and those of the unconfirmed items; nil, for a scan, when the
// store has no targeted reads, or there are none or more than Batch. The caller holds mu.
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

// scan sends a scan of parts (or a read of the sources only) as of now, and admits its
// result. Its limit covers what is in flight and was held back, plus Batch new items. A scan
// of the partitions leaves out the sources it may (leftOut).
func (s *session[T, K]) scan(parts []int, holds map[int]*hold, only map[string]bool, now time.Time) (res scanned[T], capped bool, err error) {
	s.mu.Lock()
	var except []string
	if only == nil {
		except = s.leftOut(holds)
	}
	n := s.fl.begin()
	s.fl.retries.scanning(time.Now())
	limit := len(s.fl.items) + s.fl.heldBack + s.r.opts.Batch
	s.mu.Unlock()
	s.r.stats.scans.Add(1)
	if only != nil {
		s.r.stats.targeted.Add(1)
		res, err = s.r.kind.read(s.sessionCtx, slices.Sorted(maps.Keys(only)), now, s.lookAhead(), limit)
	} else {
		res, err = s.r.kind.scan(s.sessionCtx, parts, except, now, s.lookAhead(), limit)
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
	return res, s.admit(n, now, holds, only, setOf(except), res), nil
}

// leftOut returns the sources a scan of holds' partitions leaves out, when the store can
// (execstore.Excluding; entries alone: see timerKind.excludes): those with items in flight
// under their partition's hold in holds, that are not soiled, and none of whose items in
// flight has kept it out too long (keepsOut). The scan would return their items in flight,
// and the relay could hand out none of them: it holds them. Their items not in flight are
// found by a targeted read (a mark, a commit not handed over), or by the first scan once
// they left flight or one of them no longer keeps them out. None when session.leaveNone is
// set. Sorted, at most execstore.MaxTargetedIDs. The caller holds mu.
func (s *session[T, K]) leftOut(holds map[int]*hold) []string {
	since := s.leftSince
	s.leftSince = nil
	if !s.r.kind.excludes() || len(s.fl.items) == 0 || s.leaveNone {
		return nil
	}
	now := time.Now()
	k := s.r.kind
	busy := s.fl.lanesBusy()
	out := map[string]bool{}
	for _, e := range s.fl.items {
		src := k.source(e.item)
		if holds[e.hold.part] != e.hold {
			continue
		}
		_, soiled := e.hold.sources.soiled[src]
		first, streak := since[src]
		if soiled || !s.keepsOut(e, now, busy, streak && now.Sub(first) >= s.leftFor()) {
			out[src] = false
		} else if _, seen := out[src]; !seen {
			out[src] = true
		}
	}
	var except []string
	for src, left := range out {
		if left {
			except = append(except, src)
		}
	}
	slices.Sort(except)
	except = except[:min(len(except), execstore.MaxTargetedIDs)]
	s.leftSince = make(map[string]time.Time, len(except))
	for _, src := range except {
		if first, ok := since[src]; ok {
			s.leftSince[src] = first
		} else {
			s.leftSince[src] = now
		}
	}
	return except
}

// keepsOut reports whether e, in flight, keeps its source out of the next scan, its source
// having been left out for leftFor in a row already (long) or not. It does until then, and
// after that while every lane is busy, while its handler or its settling has held it for
// less than leftFor, or while it has been settling (its ack or its failure's record being
// written) for less than settleFor. So a backlog that outlasts leftFor is not read again
// while it fills every lane, nor while it drains through its handlers and acks; an entry
// held long (a slow handler, an ack that stalls or keeps failing), or queued behind one
// while a lane idles, no longer hides from the polls its source's other entries, which an
// idle lane could take.
func (s *session[T, K]) keepsOut(e *entry[T, K], now time.Time, busy, long bool) bool {
	switch {
	case !long || busy:
		return true
	case (e.state == acking || e.state == failing) && now.Sub(e.settleAt) < s.settleFor():
		return true
	default:
		return e.held() && now.Sub(e.heldAt) < s.leftFor()
	}
}

// leftFor is how long the scans of the partitions may leave a source out in a row, and how
// long an entry in a handler or settling keeps it out: two PollIntervals, so that an entry
// in flight through a poll or two is not read again.
func (s *session[T, K]) leftFor() time.Duration { return 2 * s.r.opts.PollInterval }

// settleFor is how long an entry's settling keeps its source out: ten PollIntervals, longer
// than an ack takes on a busy server (up to 2.5 s at 1 s polls), short of hiding the source
// for as long as an ack stalls.
func (s *session[T, K]) settleFor() time.Duration { return 10 * s.r.opts.PollInterval }

// setOf returns the set of ids; nil for none.
func setOf(ids []string) map[string]bool {
	if len(ids) == 0 {
		return nil
	}
	set := make(map[string]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set
}

// recordBacklog keeps what a scan sent at now found waiting in each partition of handing,
// with the items in flight of the sources it left out (except), which it would have
// returned. The caller holds mu.
func (s *session[T, K]) recordBacklog(handing map[*hold]bool, except map[string]bool, res scanned[T], now time.Time) {
	rows := make(map[int]*Backlog, len(handing))
	for h := range handing {
		rows[h.part] = &Backlog{Partition: h.part, Holder: s.r.member, ScannedAt: now, AtLeast: res.full}
	}
	count := func(item T) {
		b := rows[s.partOf(item)]
		since, ok := s.r.kind.waiting(item, now)
		if b == nil || !ok {
			return
		}
		b.Items++
		if !since.IsZero() && (b.Oldest.IsZero() || since.Before(b.Oldest)) {
			b.Oldest = since
		}
	}
	for _, item := range res.items {
		count(item)
	}
	if len(except) > 0 {
		for _, e := range s.fl.items {
			if except[s.r.kind.source(e.item)] && handing[e.hold] {
				count(e.item)
			}
		}
	}
	for _, b := range rows {
		s.r.book.record(*b)
	}
}

// admit takes the items of scan n, sent at now, as flight.decide says, until 2×Batch items
// pace, the unconfirmed not counted (capped; scanPacing), for the holds of the scan's send
// still handing out. A complete scan tells
// their sources, and cancels the due unconfirmed items it did not return: a commit removed
// them. A scan that left out the sources except tells nothing of them.
func (s *session[T, K]) admit(n uint64, now time.Time, holds map[int]*hold, only, except map[string]bool, res scanned[T]) (capped bool) {
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
		s.recordBacklog(handing, except, res, now)
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
		if s.scanPacing() >= 2*s.r.opts.Batch {
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
				// Owed a scan at its retry time; not while a failure is being recorded,
				// whose answer asks for the scan.
				fl.retries.heldBack(lk)
			}
		case hand:
			s.take(h, item, now)
		}
	}
	for h, srcs := range latest {
		for src, v := range srcs {
			h.sources.sawItems(src, v)
		}
	}
	if !capped && !res.full {
		for h := range handing {
			h.sources.scanned(n, latest[h], partial, only, except)
		}
		fl.each(unconfirmed, func(e *entry[T, K]) {
			src := k.source(e.item)
			if (only == nil || only[src]) && !except[src] && handing[e.hold] && !k.dueAt(e.item).After(now) && !returned[e.key] {
				fl.cancel(e)
			}
		})
	}
	fl.heldBack = heldBack
	if only == nil {
		s.leaveNone = capped || res.full
	}
	fl.finish(n)
	s.r.stats.skipped.Add(int64(skipped))
	if buried {
		poke(s.rescan)
	}
	return capped
}
