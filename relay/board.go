package relay

import (
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

// boardSpacing is how many times as long as the rounds of the board take (their publish
// and their read: the median of the last boardRoundsKept, once boardRoundsKnown came) a
// round waits before the next, at least: a server that answers slowly for a while is busy,
// and a holder's rounds then take at most a fifth of its time, however slow the server. One
// slow answer does not move the median: a single stalled read costs no wake-up's latency.
const (
	boardSpacing     = 4
	boardRoundsKept  = 8
	boardRoundsKnown = 3
)

// boardWatch is what a session's watch of the board keeps from one round to the next.
type boardWatch struct {
	holder      string
	cursor      wake.Cursor
	published   []int // the partitions last published, nil before the first
	publishedAt time.Time
	idle        int // rounds in a row that found no mark, up to boardIdleShift
	rounds      latency.Window
	nextRound   time.Time // when the next round is due (boardTick)
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
	for {
		select {
		case <-stop:
			return
		case <-s.sessionCtx.Done():
			return
		case <-tick.C:
		}
		tick.Reset(s.boardTick(w))
	}
}

// boardTick runs a round when one is due, and otherwise publishes the partitions if they
// changed: reads spaced on a slow server (boardRound) must not keep a partition taken
// meanwhile unpublished, since stores mark only the holders they read. It returns the wait
// before the next tick: WakeInterval, or less when a round comes due sooner.
func (s *session[T, K]) boardTick(w *boardWatch) time.Duration {
	now := time.Now()
	if !now.Before(w.nextRound) {
		w.nextRound = now.Add(s.boardRound(w))
	} else if changed, _ := s.publishBoard(w); changed {
		w.idle = 0
	}
	return min(s.r.opts.WakeInterval, max(time.Until(w.nextRound), 0))
}

// boardRound publishes the partitions the session hands out when they changed (and every
// boardRepublish), and reads the marks the commits of other processes left it, one read by
// its id. A mark owes its execution a targeted read, as a local commit not handed over does;
// marks missed (more than the board keeps came between two reads) owe a scan of the
// partitions. It returns the wait before the next round: WakeInterval, doubled for each
// round in a row that found no mark and no change of partitions (up to boardIdleShift), and
// at least boardSpacing times as long as the rounds' calls to the board take (not what the
// relay does with the marks: a relay busy with them is not a busy server), up to
// PollInterval: a server that stalled for a while is read again as soon as a poll would.
func (s *session[T, K]) boardRound(w *boardWatch) time.Duration {
	r := s.r
	found, calls := s.publishBoard(w)
	if len(w.published) > 0 {
		start := time.Now()
		marks, err := r.board.Marks(s.sessionCtx, w.holder)
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
	return max(r.opts.WakeInterval<<w.idle, min(boardSpacing*took, r.opts.PollInterval))
}

// publishBoard publishes the partitions the session hands out when they changed since the
// last publish, or boardRepublish passed, and reports whether they changed and how long the
// publish took. A publish that fails is tried again at the next round: the polls deliver
// meanwhile.
func (s *session[T, K]) publishBoard(w *boardWatch) (changed bool, took time.Duration) {
	s.mu.Lock()
	parts, _ := s.scannable()
	s.mu.Unlock()
	changed = !slices.Equal(parts, w.published)
	if !changed && time.Since(w.publishedAt) < boardRepublish {
		return false, 0
	}
	h := wake.Holding{Kind: s.r.boardKind, Parts: parts, Ahead: s.lookAhead().Seconds()}
	start := time.Now()
	err := s.r.board.Publish(s.sessionCtx, w.holder, h)
	took = time.Since(start)
	if err != nil {
		return false, took
	}
	w.published, w.publishedAt = parts, time.Now()
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
	if len(m.Outbox) == 0 || !s.handing(h) || !h.sources.mayTakeMark(m.ID, m.Version) {
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
