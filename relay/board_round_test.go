package relay

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
)

// pacedBoard is a wake.Board whose calls take took each, in virtual time, and whose marks
// are those its writer pushed.
type pacedBoard struct {
	took time.Duration

	mu          sync.Mutex
	marks       []wake.Mark
	reads       int
	readSpans   [][2]time.Time // each read's start and end
	published   []int
	publishes   int   // every call to Publish, failed or not
	publishFail error // what Publish returns, when set
}

func (b *pacedBoard) Publish(_ context.Context, _ string, h wake.Holding) error {
	time.Sleep(b.took)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.publishes++
	if b.publishFail != nil {
		return b.publishFail
	}
	b.published = h.Parts
	return nil
}

func (b *pacedBoard) Marks(context.Context, string) (map[string][]wake.Mark, error) {
	start := time.Now()
	time.Sleep(b.took)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	b.readSpans = append(b.readSpans, [2]time.Time{start, time.Now()})
	return map[string][]wake.Mark{"w": b.marks}, nil
}

func (b *pacedBoard) Withdraw(context.Context, string) error { return nil }

func (b *pacedBoard) push(id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.marks = append(b.marks, wake.Mark{Seq: int64(len(b.marks) + 1), ID: id})
}

// A round of the board waits WakeInterval after one that found a mark or published a change,
// doubles the wait while rounds find nothing, up to 4×, and comes back at the next mark.
// In virtual time.
func TestBoardRoundBacksOffWhileIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		b.hold("S", b.lease())
		board := &pacedBoard{}
		b.r.board = board
		w := newBoardWatch("h")
		wi := b.r.opts.WakeInterval
		period := func() time.Duration {
			period, gap := b.s.boardRound(w)
			assert.Zero(t, gap, "a board that answers at once spaces nothing")
			return period
		}
		assert.Equal(t, wi, period(), "the first round publishes the partitions held")
		assert.NotEmpty(t, board.published)
		assert.Equal(t, 2*wi, period(), "a round that found nothing")
		assert.Equal(t, 4*wi, period())
		assert.Equal(t, 4*wi, period(), "backed off as far as it goes")
		board.push("S")
		assert.Equal(t, wi, period(), "a mark brings it back")
		assert.Equal(t, 5, board.reads, "a round reads once")
	})
}

// A server slow to answer for a while spaces the rounds: the gap after a round is at least
// four times as long as the rounds take (their median), so that a holder's reads take at
// most a fifth of its time on a busy server; one slow round does not space them. In
// virtual time.
func TestBoardRoundSpacesReadsOfASlowServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		b.hold("S", b.lease())
		board := &pacedBoard{took: time.Millisecond}
		b.r.board = board
		w := newBoardWatch("h")
		wi := b.r.opts.WakeInterval
		gap := func() time.Duration {
			board.push("S")
			period, gap := b.s.boardRound(w)
			assert.Equal(t, wi, period, "a round that found a mark")
			return gap
		}
		for range 3 {
			gap() // the first publishes too: its calls took 2ms
		}
		board.took = 500 * time.Millisecond
		assert.Equal(t, 8*time.Millisecond, gap(), "one slow read: four times the median (2ms), not its own time")
		board.took = 100 * time.Millisecond
		assert.Equal(t, 8*time.Millisecond, gap(), "two slow reads of five")
		assert.Equal(t, 400*time.Millisecond, gap(), "three of six slow: four times their median")
		assert.Equal(t, 400*time.Millisecond, gap())

		board.took = time.Second
		for range 3 {
			gap()
		}
		assert.Equal(t, b.r.opts.PollInterval, gap(), "a stalled server: read again a PollInterval later, as a poll would")

		board.took = time.Millisecond
		for range 7 {
			gap()
		}
		assert.Equal(t, 4*time.Millisecond, gap(), "the server answers fast again")
	})
}

// The ticks keep the gap after each round: on a server whose every call takes took, each
// read of the marks begins at least min(4×took, PollInterval) after the last one ended,
// once the rounds' median is known, the slowest server included (rounds longer than
// PollInterval are not read back to back). In virtual time.
func TestBoardTicksKeepTheGapAfterEachRound(t *testing.T) {
	for _, took := range []time.Duration{30 * time.Millisecond, 100 * time.Millisecond, 3 * time.Second} {
		t.Run(took.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := newOutboxHarness(t)
				ls := b.lease()
				b.hold("S", ls)
				board := &pacedBoard{took: took}
				b.r.board = board
				w := newBoardWatch("h")
				for i := 0; board.reads < boardRoundsKnown+8; i++ {
					require.Less(t, i, 1000, "ticks without the reads")
					resume(ls) // renewed
					board.push("S")
					time.Sleep(b.s.boardTick(w))
				}
				want := min(boardSpacing*took, b.r.opts.PollInterval)
				spans := board.readSpans[boardRoundsKnown:]
				for i := 1; i < len(spans); i++ {
					assert.GreaterOrEqual(t, spans[i][0].Sub(spans[i-1][1]), want, "the gap before read %d", i)
				}
			})
		})
	}
}

// Only the calls to the board space the rounds: a relay slow to take its marks (its session
// busy) is not a busy server. In real time (a goroutine waiting for a mutex does not let
// virtual time pass): the session is held 300ms at each round's start, the board answers at
// once, and the wait stays WakeInterval (200ms) unless the calls took 50ms.
func TestBoardRoundIsNotSpacedByTheRelaysOwnWork(t *testing.T) {
	b := newHarness(t, func(s execstore.Store) kind[execstore.OutboxEntry, entryKey] { return outboxKind{store: s} },
		Options{WakeInterval: 200 * time.Millisecond})
	b.hold("S", b.lease())
	board := &pacedBoard{}
	b.r.board = board
	w := newBoardWatch("h")
	for range boardRoundsKnown + 1 {
		board.push("S")
		b.s.mu.Lock()
		go func() {
			time.Sleep(300 * time.Millisecond)
			b.s.mu.Unlock()
		}()
		period, gap := b.s.boardRound(w)
		assert.Equal(t, 200*time.Millisecond, period)
		assert.Less(t, gap, 50*time.Millisecond, "spaced by the relay's own work, the gap would be 1.2s")
	}
}

// spacedWatch returns a harness holding execution S's partition, whose board's calls take
// 100ms, and a watch of it whose rounds are spaced (their median known): the next is due
// 400ms after the last. Call it in a synctest bubble.
func spacedWatch(t *testing.T) (*harness[execstore.OutboxEntry, entryKey], *pacedBoard, *boardWatch) {
	b := newOutboxHarness(t)
	b.hold("S", b.lease())
	board := &pacedBoard{took: 100 * time.Millisecond}
	b.r.board = board
	w := newBoardWatch("h")
	for range boardRoundsKnown {
		board.push("S")
		time.Sleep(b.s.boardTick(w))
	}
	return b, board, w
}

// otherThanS is an execution id in another partition than S's.
func otherThanS(b *harness[execstore.OutboxEntry, entryKey]) string {
	other := "T"
	for i := 0; b.r.partOf(other) == b.r.partOf("S"); i++ {
		other = fmt.Sprintf("T%d", i)
	}
	return other
}

// While a slow server spaces the rounds, a partition taken between two is published at the
// next tick, a WakeInterval later, with no read: stores mark only the holders they read. In
// virtual time.
func TestBoardTickPublishesWhileRoundsAreSpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, board, w := spacedWatch(t)
		wi := b.r.opts.WakeInterval
		require.Greater(t, time.Until(w.nextRound), wi, "rounds spaced past the tick")
		reads := board.reads
		other := otherThanS(b)
		b.hold(other, b.lease())
		assert.Equal(t, wi, b.s.boardTick(w), "the next tick, before the round")
		assert.ElementsMatch(t, []int{b.r.partOf("S"), b.r.partOf(other)}, board.published, "the partition taken, published")
		assert.Equal(t, reads, board.reads, "no read before the round is due")
	})
}

// A publish that fails between two rounds is not tried again at every tick: the next round
// tries it, and publishes once the server takes it. In virtual time.
func TestBoardTickLeavesAFailedPublishToTheRound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, board, w := spacedWatch(t)
		require.Greater(t, time.Until(w.nextRound), 2*b.r.opts.WakeInterval, "rounds spaced past two ticks")
		other := otherThanS(b)
		b.hold(other, b.lease())
		board.publishFail = errors.New("refused")
		publishes := board.publishes
		next := w.nextRound
		for time.Now().Before(next) {
			time.Sleep(b.s.boardTick(w))
		}
		assert.Equal(t, publishes+1, board.publishes, "one try between the rounds")
		board.publishFail = nil
		time.Sleep(b.s.boardTick(w))
		assert.Equal(t, publishes+2, board.publishes, "the round tries again")
		assert.ElementsMatch(t, []int{b.r.partOf("S"), b.r.partOf(other)}, board.published)
	})
}
