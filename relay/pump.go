package relay

import (
	"context"
	"errors"
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
	// describe names the item in an *Error.
	describe(item T) string
	// arm returns the channel sig closes when a commit of this process may have made
	// something new to scan for, before now+ahead; nil when sig is nil.
	arm(sig *wake.Signal, now time.Time, ahead time.Duration) <-chan struct{}
	// scan reads up to limit items the store holds, oldest first, as of now.
	scan(ctx context.Context, now time.Time, ahead time.Duration, limit int) (scanned[T], error)
	// settle acks items whose handler returned nil; errs[i] is items[i]'s failure (errs nil:
	// none failed).
	settle(ctx context.Context, items []T) (errs []error)
}

// scanned is one scan's result.
type scanned[T any] struct {
	items []T // due now, in the store's order
	// full reports that there may be more due now than the scan returned: scan again as soon
	// as there is room.
	full bool
	// next is when the earliest item not yet due becomes due (the Sweeper's look ahead); zero
	// for none known.
	next time.Time
}

// dispatch is the session's wake loop, on the run's goroutine: it scans the store and routes
// what the ledger admits to lanes, until stop is closed or the term ends. A scan is owed at
// the start, after a wake-up by a commit of this process, after PollInterval, after a full
// scan, when an execution's retry or a failed scan's back-off is due, and at the next fire
// time a scan saw; it is sent once at most Batch items are in flight (so scans overlap
// deliveries but never pile them up), while the lease is live, and, unless it follows a full
// scan, no sooner than ScanGap after the last one.
func (s *session[T, K]) dispatch(stop <-chan struct{}) {
	o := &s.r.opts
	poll := time.NewTimer(o.PollInterval)
	defer poll.Stop()
	alarm := time.NewTimer(time.Hour)
	defer alarm.Stop()
	scanRetry := newBackoff(o.RetryMin, o.RetryMax)
	var (
		wakeC     <-chan struct{}
		retryScan time.Time // when a failed scan is retried; zero for none
		fireAt    time.Time // the next fire time the last scan saw, by Options.Clock
		owed      = true
		followUp  bool      // the scan owed follows a full one: no ScanGap
		lastScan  time.Time // when the last scan was sent
	)
	for {
		gapLeft := o.ScanGap - time.Since(lastScan)
		if followUp {
			gapLeft = 0
		}
		if owed && gapLeft <= 0 && s.room() && s.lease.live() {
			owed, followUp = false, false
			now, started := o.Clock(), time.Now()
			lastScan = started
			wakeC = s.r.kind.arm(s.r.signal, now, o.PollInterval)
			res, capped, err := s.scan(now)
			// The next look is PollInterval after this one's now: a Sweeper is woken only
			// for timers due before then.
			poll.Reset(max(0, o.PollInterval-time.Since(started)))
			switch {
			case err == nil:
				scanRetry.Reset()
				retryScan = time.Time{}
				owed, fireAt = res.full || capped, res.next
				followUp = owed
			case errors.Is(err, execstore.ErrClosed):
				s.end(&Error{Op: OpScan, Err: err})
			default:
				retryScan = time.Now().Add(scanRetry.NextBackOff())
			}
			continue // a full scan is followed by the next at once, if there is room
		}
		switch {
		case owed && gapLeft > 0:
			alarm.Reset(gapLeft) // the scan owed waits for the gap
		case owed:
			alarm.Stop() // a scan waits for room or a live lease, which an alarm cannot bring
		default:
			alarm.Reset(s.untilAlarm(retryScan, fireAt))
		}
		select {
		case <-stop:
			return
		case <-s.ctx.Done():
			return
		case <-wakeC:
			wakeC = nil
			owed = true
			s.r.stats.wakeups.Add(1)
		case <-poll.C:
			owed = true
		case <-alarm.C:
			owed = true
		case <-s.progress:
		}
	}
}

// room reports whether a scan may be sent: at most Batch items are in flight.
func (s *session[T, K]) room() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ledger.held() <= s.r.opts.Batch
}

// untilAlarm is how long until the earliest of a failed scan's retry, an execution's retry
// and the next fire time (an hour when there is none: the poll comes first).
func (s *session[T, K]) untilAlarm(retryScan, fireAt time.Time) time.Duration {
	d := time.Hour
	now := time.Now()
	if !retryScan.IsZero() {
		d = min(d, retryScan.Sub(now))
	}
	s.mu.Lock()
	at, ok := s.retries.next(now)
	s.mu.Unlock()
	if ok {
		d = min(d, at.Sub(now))
	}
	if !fireAt.IsZero() {
		d = min(d, fireAt.Sub(s.r.opts.Clock()))
	}
	return max(d, 0)
}

// scan sends one scan, as of now, and admits its result; capped reports that it left items
// out to keep at most 2×Batch in flight. Its limit covers what is in flight and what the
// last scan held back, which the store returns first, plus Batch new items.
func (s *session[T, K]) scan(now time.Time) (res scanned[T], capped bool, err error) {
	s.mu.Lock()
	n := s.ledger.startScan()
	limit := s.ledger.held() + s.heldBack + s.r.opts.Batch
	s.mu.Unlock()
	s.r.stats.scans.Add(1)
	res, err = s.r.kind.scan(s.ctx, now, s.r.opts.PollInterval, limit)
	if err != nil {
		s.mu.Lock()
		s.ledger.finishScan(n)
		s.mu.Unlock()
		if s.ctx.Err() == nil {
			s.r.stats.scanErrors.Add(1)
			s.r.opts.OnError(&Error{Op: OpScan, Err: err})
		}
		return res, false, err
	}
	return res, s.admit(n, res.items), nil
}

// admit routes to lanes the items of scan n that the ledger admits and whose execution is
// not held back for a retry, in order, until 2×Batch items are in flight; it reports whether
// it stopped there.
func (s *session[T, K]) admit(n uint64, items []T) (capped bool) {
	now := time.Now()
	k := s.r.kind
	s.mu.Lock()
	defer s.mu.Unlock()
	skipped, heldBack, taken := 0, 0, 0
	for _, item := range items {
		if s.ledger.held() >= 2*s.r.opts.Batch {
			capped = true
			break
		}
		key := k.key(item)
		if !s.ledger.admissible(key, n) {
			skipped++
			continue
		}
		lk := k.lane(item)
		if s.retries.holds(lk, now) {
			heldBack++
			continue
		}
		s.ledger.take(key)
		taken++
		s.route(lk, item)
	}
	s.heldBack = heldBack
	s.ledger.finishScan(n)
	s.r.stats.skipped.Add(int64(skipped))
	s.r.stats.inFlight.Add(int64(taken))
	return capped
}
