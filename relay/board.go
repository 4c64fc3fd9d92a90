package relay

import (
	"context"
	"slices"
	"time"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/latency"
	"github.com/execstore/execstore/internal/wake"
)

// boardRepublish is how often a session publishes its partitions on the board again while
// they do not change: a store goes by a record published within 30s.
const boardRepublish = 10 * time.Second

// boardIdleShift bounds how far an idle session backs off its reads of its marks: to
// WakeInterval<<boardIdleShift (4×) while its reads find none.
const boardIdleShift = 2

// boardRefollow is how long a session waits before it follows the board's changes again
// (wake.Follower) after the push ended or was refused.
const boardRefollow = 10 * time.Second

// boardSpacing is how many times as long as the rounds of the board take (their publish
// and their read: the median of the last boardRoundsKept, once boardRoundsKnown came) the
// wait after a round's end is, at least: a server that answers slowly for a while is busy,
// and a holder's rounds then take at most a fifth of its time, unless they take more than a
// quarter of PollInterval (the wait stops at PollInterval). One slow answer does not move
// the median: a single stalled read costs no wake-up's latency.
const (
	boardSpacing     = 4
	boardRoundsKept  = 8
	boardRoundsKnown = 3
)

// boardWatch is what a session's watch of the board keeps from one round to the next.
type boardWatch struct {
	holder    string
	cursor    wake.Cursor
	published []int // the partitions last published, nil before the first
	// publishedGen is the generation last published (wake.Holding's Gen): the latest the
	// session drew then.
	publishedGen int64
	publishedAt  time.Time
	idle         int // rounds in a row that found no mark, up to boardIdleShift
	rounds       latency.Window
	nextRound    time.Time // when the next round is due (boardTick)
	// spacedUntil is when the next round may come at the soonest, pushed changes or not: a
	// WakeInterval after the last round's start, and its gap after its end.
	spacedUntil time.Time
	// follow is the board's push of the changes of the holder's record (wake.Follower) while
	// it runs, nil otherwise; following is set once it is open. The rounds then come at each
	// change (spaced as ever) and once per PollInterval, rather than every WakeInterval.
	follow    <-chan struct{}
	following bool
	followAt  time.Time // when to follow again: boardRefollow after the last try
	// publishFailed is set when the last publish failed: the ticks between rounds leave the
	// next try to the next round, so a server that refuses is not asked every WakeInterval.
	publishFailed bool
}

func newBoardWatch(holder string) *boardWatch {
	return &boardWatch{holder: holder, rounds: latency.Window{Size: boardRoundsKept, Min: boardRoundsKnown}}
}

// watchBoard is the session's side of the store's board (wake.Board), on a goroutine of its
// own until stop, in ticks (boardTick) and rounds (boardRound). Its record is withdrawn at
// the end.
func (s *session[T, K]) watchBoard(stop <-chan struct{}) {
	r := s.r
	w := newBoardWatch(r.member + "/" + string(r.boardKind))
	defer wake.HoldLocally(w.holder)()
	tick := time.NewTimer(r.opts.WakeInterval)
	defer tick.Stop()
	defer func() {
		if len(w.published) > 0 {
			releaseCtx, cancel := s.releaseCtx()
			defer cancel()
			_ = r.board.Withdraw(releaseCtx, w.holder)
		}
	}()
	followCtx, endFollow := context.WithCancel(s.sessionCtx)
	defer func() {
		endFollow()
		if w.follow != nil {
			for range w.follow { // the push's goroutine ends with followCtx
			}
		}
	}()
	for {
		s.followBoard(followCtx, w)
		select {
		case <-stop:
			return
		case <-s.sessionCtx.Done():
			return
		case <-tick.C:
		case _, open := <-w.follow:
			w.changed(open, time.Now())
		}
		tick.Reset(s.boardTick(w))
	}
}

// followBoard follows the changes of the holder's record when the board can push them and
// boardRefollow passed since the last try.
func (s *session[T, K]) followBoard(ctx context.Context, w *boardWatch) {
	f, ok := s.r.board.(wake.Follower)
	if !ok || w.follow != nil || time.Now().Before(w.followAt) {
		return
	}
	w.follow, w.followAt = f.Follow(ctx, w.holder), time.Now().Add(boardRefollow)
}

// changed takes a receive of the board's push at now (open false: the push ended): a round
// is due at once, spaced after the last as ever. The first receive says the push is open;
// marks written before it opened are read by that round too. A push that ends having never
// opened (refused) changes nothing: the rounds kept their interval.
func (w *boardWatch) changed(open bool, now time.Time) {
	if !open {
		was := w.following
		w.follow, w.following = nil, false
		if !was {
			return
		}
	}
	w.following = open
	w.nextRound = later(now, w.spacedUntil)
}

// boardTick runs a round when one is due, and otherwise publishes the partitions if they
// changed since the last publish (unless it failed: the round tries again): reads spaced on
// a slow server (boardRound) must not keep a partition taken meanwhile unpublished, since
// stores mark only the holders they read. The next round is due at the later of the round's
// period after its start and its gap after its end. It returns the wait before the next
// tick: WakeInterval, or less when a round comes due sooner.
func (s *session[T, K]) boardTick(w *boardWatch) time.Duration {
	start := time.Now()
	if !start.Before(w.nextRound) {
		period, gap := s.boardRound(w)
		w.spacedUntil = later(start.Add(s.r.opts.WakeInterval), time.Now().Add(gap))
		w.nextRound = later(start.Add(period), w.spacedUntil)
	} else if changed, _ := s.publishBoard(w, false); changed {
		w.idle = 0
	}
	return min(s.r.opts.WakeInterval, max(time.Until(w.nextRound), 0))
}

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// boardRound publishes the partitions the session hands out when they changed (and every
// boardRepublish), and reads the marks the commits of other processes left it, one read by
// its id. A mark owes its execution a targeted read, as a local commit not handed over does;
// marks missed (more than the board keeps came between two reads) owe a scan of the
// partitions. It returns when the next round is due: period after this one's start,
// WakeInterval doubled for each round in a row that found no mark and no change of
// partitions (up to boardIdleShift), or PollInterval while the board pushes the changes of
// the record (a change brings the next round sooner: changed); and gap after its end,
// boardSpacing times as long as the rounds' calls to the board take (not what the relay does
// with the marks: a relay busy with them is not a busy server), up to PollInterval: a server
// that stalled for a while is read again as soon as a poll would. Each call is bounded by
// PollInterval (boardCallCtx).
func (s *session[T, K]) boardRound(w *boardWatch) (period, gap time.Duration) {
	r := s.r
	found, calls := s.publishBoard(w, true)
	if len(w.published) > 0 {
		start := time.Now()
		readCtx, cancel := s.boardCallCtx()
		marks, err := r.board.Marks(readCtx, w.holder)
		cancel()
		calls += time.Since(start)
		if err == nil {
			if fresh, missed := w.cursor.Next(marks); len(fresh) > 0 || missed {
				s.woken(fresh, missed)
				found = true
			}
		}
	}
	if found {
		w.idle = 0
	} else {
		w.idle = min(w.idle+1, boardIdleShift)
	}
	w.rounds.Observe(calls)
	took, _ := w.rounds.Median()
	gap = min(boardSpacing*took, r.opts.PollInterval)
	if w.following {
		return r.opts.PollInterval, gap
	}
	return r.opts.WakeInterval << w.idle, gap
}

// boardCallCtx is the context of one call to the board: the session's, bounded by
// PollInterval, so that a stalled server holds the watch (and the partitions it publishes)
// no longer than a poll would wait.
func (s *session[T, K]) boardCallCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(s.sessionCtx, s.r.opts.PollInterval)
}

// publishBoard publishes the partitions the session hands out, and its latest generation
// (wake.Holding's Gen), when either changed since the last publish that succeeded, or
// boardRepublish passed since it (whatever the rounds' period: PollInterval while
// following); between rounds (round false), not after a publish that failed. It reports
// whether they changed and how long the publish took. A publish that fails is tried again
// at the next round: the polls deliver meanwhile.
func (s *session[T, K]) publishBoard(w *boardWatch, round bool) (changed bool, took time.Duration) {
	s.mu.Lock()
	parts, _ := s.scannable()
	gen := s.gens.cur
	s.mu.Unlock()
	changed = !slices.Equal(parts, w.published) || gen != w.publishedGen
	due := (changed || time.Since(w.publishedAt) >= boardRepublish) && (round || !w.publishFailed)
	if !due {
		return false, 0
	}
	h := wake.Holding{Kind: s.r.boardKind, Parts: parts, Ahead: s.lookAhead().Seconds(), Gen: gen}
	start := time.Now()
	publishCtx, cancel := s.boardCallCtx()
	err := s.r.board.Publish(publishCtx, w.holder, h)
	cancel()
	took = time.Since(start)
	if w.publishFailed = err != nil; w.publishFailed {
		return false, took
	}
	w.published, w.publishedGen, w.publishedAt = parts, gen, time.Now()
	return changed, took
}

// woken owes a targeted read of the executions marked fresh whose partitions the session
// holds (for a sweeper, those whose timer its scans would read already), and a scan of
// the partitions when marks were missed. A relay's hold that knows an execution up to the
// version a mark names (sources) has read its items already, and owes no read for it; a scan
// that reads the execution at that version or later pays what the mark owes.
func (s *session[T, K]) woken(fresh []wake.Mark, missed bool) {
	horizon := contract.StoredTime(s.r.opts.Clock().Add(s.lookAhead()))
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.fl.begin() // what a mark carries is decided as a scan begun now would be
	defer s.fl.finish(n)
	owed := missed
	for _, m := range fresh {
		// A hold not handing out for now (its lease's renewal late) is owed the read all the
		// same: it is sent once the hold hands out again.
		h := s.holds[s.r.partOf(m.ID)]
		if h == nil || h.state != holdActive || (s.r.boardKind == wake.Timers && m.FireAt > horizon) {
			continue
		}
		switch {
		case !s.r.kind.chained():
			// A timer's scan reads up to its own horizon: a version it read says nothing of
			// a timer due after it.
			h.sources.soil(m.ID, s.fl.epoch)
		case h.sources.knows(m.ID, m.Version):
			continue
		case s.takeMarked(h, m, n):
			continue
		default:
			h.sources.mark(m.ID, s.fl.epoch, m.Version)
		}
		s.r.stats.woken.Add(1)
		owed = true
	}
	if missed {
		s.wideOwed, s.leaveNone = true, true
	}
	if owed {
		poke(s.rescan)
	}
}

// takeMarked takes the outbox entries mark m carries under h, with no read, and reports
// whether it did: when h hands out, the entries' source allows it (sources.mayTakeMark),
// flight.decide at epoch n hands every one of them out, and there is room. The caller holds
// mu.
func (s *session[T, K]) takeMarked(h *hold, m wake.Mark, n uint64) bool {
	if len(m.Outbox) == 0 || !s.handing(h) || !h.sources.mayTakeMark(m.ID, m.Version, m.Gen) {
		return false
	}
	items := s.r.kind.carried(m)
	if len(items) != len(m.Outbox) || s.pacing()+len(items) > 2*s.r.opts.Batch {
		return false
	}
	now, asOf := time.Now(), s.r.opts.Clock()
	for _, item := range items {
		if s.fl.decide(s.r.kind.key(item), s.r.kind.lane(item), n, now) != hand {
			return false
		}
	}
	h.sources.committed(m.ID, m.Version)
	h.sources.sawItems(m.ID, m.Version)
	for _, item := range items {
		s.take(h, item, asOf)
		s.r.stats.handedOver.Add(1)
	}
	return true
}
