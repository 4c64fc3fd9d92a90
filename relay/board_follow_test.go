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
// it followed the board, and returns a func that counts the reads of the marks that come of
// do (nil: nothing) and within d after it. The count starts before do: the watch runs in
// parallel with the test, and may read before do returns.
func watching(t *testing.T, b *harness[execstore.OutboxEntry, entryKey], board *followingBoard) (readsOf func(do func(), d time.Duration) int) {
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
	return func(do func(), d time.Duration) int {
		before := board.readCount()
		if do != nil {
			do()
		}
		time.Sleep(d)
		synctest.Wait()
		return board.readCount() - before
	}
}

// Where the board pushes the changes of the holder's record (wake.Follower), the watch
// follows it: a change is read at once (no sooner than WakeInterval after the last read
// began), and while the record does not change the watch reads it once per PollInterval,
// not every WakeInterval. When the push ends, the reads come back every WakeInterval or so,
// and the watch follows again boardRefollow after its last try. The push's goroutine ends with the watch (the bubble would not end otherwise). In
// virtual time.
func TestBoardWatchFollowsWhereTheBoardPushes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newOutboxHarness(t)
		ls := b.lease()
		b.hold("S", ls)
		board := &followingBoard{}
		b.r.board = board
		readsOf := watching(t, b, board)
		wi, poll := b.r.opts.WakeInterval, b.r.opts.PollInterval

		assert.GreaterOrEqual(t, readsOf(nil, time.Second), int(time.Second/(4*wi)), "before the push is open, a read every WakeInterval or so")
		require.Equal(t, 1, board.followCount(), "followed from the start")

		assert.Equal(t, 1, readsOf(board.change, 0), "the push open: a read at once, for the marks written before it")
		for range 2 {
			resume(ls)
			assert.Equal(t, 5, readsOf(nil, 5*poll), "while nothing changes, a read per PollInterval")
		}
		for range 3 {
			time.Sleep(wi)
			assert.Equal(t, 1, readsOf(board.change, 0), "a change is read at once")
		}
		assert.Zero(t, readsOf(board.change, wi-time.Millisecond), "a change read no sooner than WakeInterval after the last read began")
		assert.Equal(t, 1, readsOf(nil, time.Millisecond), "a change read WakeInterval after the last read began")

		resume(ls)
		time.Sleep(wi)
		assert.Equal(t, 1, readsOf(board.end, 0), "the push ended (over boardRefollow after the first try): a read at once")
		assert.Equal(t, 2, board.followCount(), "followed again at once")
		// Ended just after its try: back on the interval.
		assert.GreaterOrEqual(t, readsOf(board.end, time.Second), int(time.Second/(4*wi)), "the push ended: a read every WakeInterval or so again")
		assert.Equal(t, 2, board.followCount(), "not followed again before boardRefollow")
		for range 2 {
			resume(ls)
			time.Sleep(boardRefollow / 2)
		}
		synctest.Wait()
		assert.Equal(t, 3, board.followCount(), "followed again boardRefollow after the last try")
		resume(ls)
		readsOf(board.end, 0) // the watch ends while it follows nothing too
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
		readsOf := watching(t, b, board)
		require.Equal(t, 1, readsOf(board.change, 300*time.Millisecond), "the push open, read")
		for range boardRoundsKnown {
			require.Equal(t, 1, readsOf(board.change, 300*time.Millisecond), "a change, read")
		}
		readsOf(board.change, 150*time.Millisecond) // its round's read ended 50ms ago
		require.Equal(t, 1, readsOf(board.change, 500*time.Millisecond), "a change, read")
		board.mu.Lock()
		spans := board.readSpans
		board.mu.Unlock()
		last, before := spans[len(spans)-1], spans[len(spans)-2]
		assert.Equal(t, boardSpacing*board.took, last[0].Sub(before[1]), "the change read once the gap passed")
	})
}

// While following, the rounds come once per PollInterval when nothing changes, but the
// partitions are still published every boardRepublish: stores go by a record published
// within 30s, and a PollInterval of a minute must not let it lapse. In virtual time.
func TestBoardWatchRepublishesWhileFollowing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := newHarness(t, func(s execstore.Store) kind[execstore.OutboxEntry, entryKey] { return outboxKind{store: s} },
			Options{PollInterval: 45 * time.Second})
		ls := b.lease()
		b.hold("S", ls)
		board := &followingBoard{}
		b.r.board = board
		readsOf := watching(t, b, board)
		readsOf(board.change, 0) // open
		board.mu.Lock()
		publishes := board.publishes
		board.mu.Unlock()
		for range 12 {
			resume(ls)
			readsOf(nil, 5*time.Second)
		}
		board.mu.Lock()
		defer board.mu.Unlock()
		assert.Equal(t, publishes+6, board.publishes, "a publish every boardRepublish over 60s")
	})
}

// A push that ends without having opened (the server refused it) leaves the rounds as they
// were; one that ends after it opened brings a round at once, back on the interval.
func TestBoardWatchChangedByAPushThatNeverOpened(t *testing.T) {
	now := time.Now()
	w := newBoardWatch("h")
	w.follow, w.nextRound = make(chan struct{}), now.Add(time.Second)
	w.changed(false, now)
	assert.Nil(t, w.follow)
	assert.Equal(t, now.Add(time.Second), w.nextRound, "refused: no round for it")

	w.follow = make(chan struct{})
	w.changed(true, now)
	assert.True(t, w.following)
	assert.Equal(t, now, w.nextRound, "open: a round at once")
	w.nextRound = now.Add(time.Second)
	w.changed(false, now)
	assert.False(t, w.following)
	assert.Nil(t, w.follow)
	assert.Equal(t, now, w.nextRound, "ended after it opened: a round at once")
}
