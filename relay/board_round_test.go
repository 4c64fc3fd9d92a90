package relay

import (
	"context"
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

	mu        sync.Mutex
	marks     []wake.Mark
	reads     int
	published []int
}

func (b *pacedBoard) Publish(_ context.Context, _ string, h wake.Holding) error {
	time.Sleep(b.took)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.published = h.Parts
	return nil
}

func (b *pacedBoard) Marks(context.Context, string) (map[string][]wake.Mark, error) {
	time.Sleep(b.took)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
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
		assert.Equal(t, wi, b.s.boardRound(w), "the first round publishes the partitions held")
		assert.NotEmpty(t, board.published)
		assert.Equal(t, 2*wi, b.s.boardRound(w), "a round that found nothing")
		assert.Equal(t, 4*wi, b.s.boardRound(w))
		assert.Equal(t, 4*wi, b.s.boardRound(w), "backed off as far as it goes")
		board.push("S")
		assert.Equal(t, wi, b.s.boardRound(w), "a mark brings it back")
		assert.Equal(t, 5, board.reads, "a round reads once")
	})
}

// A server slow to answer for a while spaces the rounds: the wait after a round is at least
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
		for range 3 {
			b.s.boardRound(w)
		}
		board.push("S")
		board.took = 500 * time.Millisecond
		assert.Equal(t, wi, b.s.boardRound(w), "one slow read")
		board.push("S")
		board.took = 100 * time.Millisecond
		assert.Equal(t, wi, b.s.boardRound(w), "two slow reads of five")
		board.push("S")
		assert.Equal(t, 400*time.Millisecond, b.s.boardRound(w), "three of six slow: four times their median")
		board.push("S")
		assert.Equal(t, 400*time.Millisecond, b.s.boardRound(w))

		board.took = time.Second
		for range 3 {
			board.push("S")
			b.s.boardRound(w)
		}
		assert.Equal(t, b.r.opts.PollInterval, b.s.boardRound(w), "a stalled server: read again a PollInterval later, as a poll would")

		board.took = time.Millisecond
		for range 7 {
			board.push("S")
			b.s.boardRound(w)
		}
		board.push("S")
		assert.Equal(t, wi, b.s.boardRound(w), "the server answers fast again")
	})
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
		assert.Equal(t, 200*time.Millisecond, b.s.boardRound(w))
	}
}

// While a slow server spaces the rounds, a partition taken between two is published at the
// next tick, a WakeInterval later, with no read: stores mark only the holders they read. In
// virtual time.
func TestBoardTickPublishesWhileRoundsAreSpaced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		b.hold("S", b.lease())
		board := &pacedBoard{took: 100 * time.Millisecond}
		b.r.board = board
		w := newBoardWatch("h")
		wi := b.r.opts.WakeInterval
		for range boardRoundsKnown {
			board.push("S")
			time.Sleep(b.s.boardTick(w))
		}
		require.Greater(t, time.Until(w.nextRound), wi, "rounds spaced past the tick")
		reads := board.reads
		other := "T"
		for i := 0; b.r.partOf(other) == b.r.partOf("S"); i++ {
			other = fmt.Sprintf("T%d", i)
		}
		b.hold(other, b.lease())
		assert.Equal(t, wi, b.s.boardTick(w), "the next tick, before the round")
		assert.ElementsMatch(t, []int{b.r.partOf("S"), b.r.partOf(other)}, board.published, "the partition taken, published")
		assert.Equal(t, reads, board.reads, "no read before the round is due")
	})
}
