package relay

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

// followingBoard is a pacedBoard that pushes the changes of the holder's record
// (wake.Follower): each Follow hands out a channel that the test sends on (change) and ends
// (end), and that ends with Follow's context.
type followingBoard struct {
	pacedBoard
	follows int
	push    chan struct{} // the running push's channel, nil when none
}

func (b *followingBoard) Follow(ctx context.Context, _ string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	b.follows++
	b.push = ch
	b.mu.Unlock()
	go func() {
		<-ctx.Done()
		b.endPush(ch)
	}()
	return ch
}

// change sends a change on the running push, as the server would (the first says it is
// open).
func (b *followingBoard) change() {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case b.push <- struct{}{}:
	default:
	}
}

// end ends the running push, as a failed call would.
func (b *followingBoard) end() {
	b.mu.Lock()
	ch := b.push
	b.mu.Unlock()
	b.endPush(ch)
}

func (b *followingBoard) endPush(ch chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ch != nil && b.push == ch {
		close(ch)
		b.push = nil
	}
}

func (b *followingBoard) followCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.follows
}

func (b *pacedBoard) readCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.reads
}

// watching runs the session's watch of the board on a goroutine until the test ends, once
// it followed the board, and returns a func that counts the reads of the marks made within d from now.
func watching(t *testing.T, b *harness[execstore.OutboxEntry, entryKey], board *followingBoard) (readsWithin func(d time.Duration) int) {
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		b.s.watchBoard(stop)
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	synctest.Wait() // the watch's first Follow
	return func(d time.Duration) int {
		before := board.readCount()
		time.Sleep(d)
		synctest.Wait()
		return board.readCount() - before
	}
}

// Where the board pushes the changes of the holder's record (wake.Follower), the watch
// follows it: a change is read at once, and while the record does not change the watch
// reads it once per PollInterval, not every WakeInterval. When the push ends, the reads come
// back every WakeInterval or so, and the watch follows again boardRefollow after its last
// try. The push's goroutine ends with the watch (the bubble would not end otherwise). In
// virtual time.
func TestBoardWatchFollowsWhereTheBoardPushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		ls := b.lease()
		b.hold("S", ls)
		board := &followingBoard{}
		b.r.board = board
		readsWithin := watching(t, b, board)
		wi, poll := b.r.opts.WakeInterval, b.r.opts.PollInterval

		assert.GreaterOrEqual(t, readsWithin(time.Second), int(time.Second/(4*wi)), "before the push is open, a read every WakeInterval or so")
		require.Equal(t, 1, board.followCount(), "followed from the start")

		board.change() // open
		assert.Equal(t, 1, readsWithin(0), "the push open: a read at once, for the marks written before it")
		for range 2 {
			resume(ls)
			assert.Equal(t, 5, readsWithin(5*poll), "while nothing changes, a read per PollInterval")
		}
		for range 3 {
			board.change()
			assert.Equal(t, 1, readsWithin(0), "a change is read at once")
			time.Sleep(wi)
		}

		resume(ls)
		board.end() // over boardRefollow after the first try
		assert.Equal(t, 1, readsWithin(0), "the push ended: a read at once")
		assert.Equal(t, 2, board.followCount(), "followed again at once")
		board.end() // just after its try
		assert.GreaterOrEqual(t, readsWithin(time.Second), int(time.Second/(4*wi)), "the push ended: a read every WakeInterval or so again")
		assert.Equal(t, 2, board.followCount(), "not followed again before boardRefollow")
		for range 2 {
			resume(ls)
			time.Sleep(boardRefollow / 2)
		}
		synctest.Wait()
		assert.Equal(t, 3, board.followCount(), "followed again boardRefollow after the last try")
		resume(ls)
		board.end() // the watch ends while it follows nothing too
		readsWithin(0)
	})
}

// A change pushed while a slow server spaces the rounds is read once the gap after the last
// round passed, not at once: the push does not make a busy server's holders read it more
// often. In virtual time.
func TestBoardWatchSpacesTheReadsOfChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		ls := b.lease()
		b.hold("S", ls)
		board := &followingBoard{pacedBoard: pacedBoard{took: 100 * time.Millisecond}}
		b.r.board = board
		readsWithin := watching(t, b, board)
		board.change() // open
		require.Equal(t, 1, readsWithin(300*time.Millisecond), "the push open, read")
		for range boardRoundsKnown {
			board.change()
			require.Equal(t, 1, readsWithin(300*time.Millisecond), "a change, read")
		}
		board.change()
		readsWithin(150 * time.Millisecond) // its round's read ended 50ms ago
		board.change()
		require.Equal(t, 1, readsWithin(500*time.Millisecond), "a change, read")
		board.mu.Lock()
		spans := board.readSpans
		board.mu.Unlock()
		last, before := spans[len(spans)-1], spans[len(spans)-2]
		assert.Equal(t, boardSpacing*board.took, last[0].Sub(before[1]), "the change read once the gap passed")
	})
}
