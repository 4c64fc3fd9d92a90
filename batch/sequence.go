package batch

import (
	"context"
	"sync"
)

// defaultBlockSize is the number of seqs a Sequence reserves per server command.
const defaultBlockSize = 256

// Reserver reserves n seqs on the server and returns the last of them: the block is
// (last-n, last].
type Reserver func(ctx context.Context, n int64) (last int64, err error)

// Sequence allocates seqs from prefetched blocks. Create it with NewSequence; Close it to wait
// for a background reservation.
type Sequence struct {
	reserve   Reserver
	blockSize int64
	lowWater  int64
	bg        context.Context
	cancelBg  context.CancelFunc

	mu       sync.Mutex
	next     int64 // next seq to hand out
	end      int64 // last seq of the current block; next > end means empty
	spare    [2]int64
	hasSpare bool
	fetch    *fetch // the reservation in flight, if any
	wg       sync.WaitGroup
}

type fetch struct {
	done chan struct{}
	err  error
}

// NewSequence returns a Sequence reserving blockSize seqs at a time (256 when
// blockSize <= 0). The next block is reserved once fewer than a quarter of a block remain.
func NewSequence(reserve Reserver, blockSize int64) *Sequence {
	if blockSize <= 0 {
		blockSize = defaultBlockSize
	}
	s := &Sequence{reserve: reserve, blockSize: blockSize, lowWater: (blockSize + 3) / 4, next: 1, end: 0}
	s.bg, s.cancelBg = context.WithCancel(context.Background())
	return s
}

// Take appends n fresh seqs to dst, in increasing order, and returns it. It waits on the
// server only when no reserved seq is left; ctx bounds that wait.
func (s *Sequence) Take(ctx context.Context, n int, dst []int64) ([]int64, error) {
	if n <= 0 {
		return dst, nil
	}
	s.mu.Lock()
	for n > 0 {
		if s.next > s.end && s.hasSpare {
			s.next, s.end, s.hasSpare = s.spare[0], s.spare[1], false
		}
		if s.next <= s.end {
			for n > 0 && s.next <= s.end {
				dst = append(dst, s.next)
				s.next++
				n--
			}
			continue
		}
		f := s.startFetchLocked()
		s.mu.Unlock()
		select {
		case <-f.done:
		case <-ctx.Done():
			return dst, ctx.Err()
		}
		if f.err != nil {
			return dst, f.err
		}
		s.mu.Lock()
	}
	if s.end-s.next+1 < s.lowWater && !s.hasSpare {
		s.startFetchLocked()
	}
	s.mu.Unlock()
	return dst, nil
}

// startFetchLocked starts a background reservation unless one is in flight, and returns the
// one in flight. After Close it starts none and returns a failed one.
func (s *Sequence) startFetchLocked() *fetch {
	if s.fetch != nil {
		return s.fetch
	}
	if err := s.bg.Err(); err != nil {
		f := &fetch{done: make(chan struct{}), err: err}
		close(f.done)
		return f
	}
	f := &fetch{done: make(chan struct{})}
	s.fetch = f
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		last, err := s.reserve(s.bg, s.blockSize)
		s.mu.Lock()
		if err == nil {
			first := last - s.blockSize + 1
			if s.next > s.end {
				s.next, s.end = first, last
			} else {
				s.spare, s.hasSpare = [2]int64{first, last}, true
			}
		}
		f.err = err
		s.fetch = nil
		s.mu.Unlock()
		close(f.done)
	}()
	return f
}

// Close cancels a reservation in flight and waits for it to end. Afterwards Take hands out
// the seqs already reserved and then returns context.Canceled; it reserves no more.
func (s *Sequence) Close() {
	s.mu.Lock()
	s.cancelBg() // under mu, so no reservation starts after Wait below
	s.mu.Unlock()
	s.wg.Wait()
}
