package batch_test

import (
	"cmp"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/execstore/execstore/batch"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// counter is a Reserver backed by a shared counter, as the counters collection is shared by
// every process. It counts its calls and records how many of them overlap.
type counter struct {
	last        *atomic.Int64
	calls       atomic.Int32
	inFlight    atomic.Int32
	maxInFlight atomic.Int32
}

func (c *counter) reserve(ctx context.Context, n int64) (int64, error) {
	c.calls.Add(1)
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := c.inFlight.Add(1)
	defer c.inFlight.Add(-1)
	for {
		m := c.maxInFlight.Load()
		if now <= m || c.maxInFlight.CompareAndSwap(m, now) {
			break
		}
	}
	runtime.Gosched() // let a second reservation overlap this one, if the Sequence allows it
	return c.last.Add(n), nil
}

// scripted is a Reserver whose calls wait until the test answers them.
type scripted struct {
	calls       chan *reservation
	inFlight    atomic.Int32
	maxInFlight atomic.Int32
}

// reservation is one call to a scripted Reserver.
type reservation struct {
	ctx   context.Context
	n     int64
	reply chan reply
}

type reply struct {
	last int64
	err  error
}

func newScripted() *scripted { return &scripted{calls: make(chan *reservation)} }

func (r *scripted) reserve(ctx context.Context, n int64) (int64, error) {
	now := r.inFlight.Add(1)
	defer r.inFlight.Add(-1)
	for {
		m := r.maxInFlight.Load()
		if now <= m || r.maxInFlight.CompareAndSwap(m, now) {
			break
		}
	}
	c := &reservation{ctx: ctx, n: n, reply: make(chan reply, 1)}
	r.calls <- c
	rep := <-c.reply
	return rep.last, rep.err
}

// next returns the next call, waiting for it.
func (r *scripted) next() *reservation { return <-r.calls }

// requireIdle fails if a call is waiting for an answer.
func (r *scripted) requireIdle(t *testing.T) {
	t.Helper()
	select {
	case c := <-r.calls:
		t.Fatalf("unexpected reservation of %d seqs", c.n)
	default:
	}
}

func (c *reservation) answer(last int64, err error) { c.reply <- reply{last, err} }

// watchedCtx closes waiting when Take first looks at Done, which it does only once it has to
// wait for a reservation.
type watchedCtx struct {
	context.Context
	once    sync.Once
	waiting chan struct{}
}

func watch(ctx context.Context) *watchedCtx {
	return &watchedCtx{Context: ctx, waiting: make(chan struct{})}
}

func (c *watchedCtx) Done() <-chan struct{} {
	c.once.Do(func() { close(c.waiting) })
	return c.Context.Done()
}

// taken is the result of a Take run in the background.
type taken struct {
	seqs []int64
	err  error
}

func takeAsync(ctx context.Context, s *batch.Sequence, n int) <-chan taken {
	res := make(chan taken, 1)
	go func() {
		seqs, err := s.Take(ctx, n, nil)
		res <- taken{seqs, err}
	}()
	return res
}

func seqRange(first, last int64) []int64 {
	var out []int64
	for v := first; v <= last; v++ {
		out = append(out, v)
	}
	return out
}

func TestTakeSequential(t *testing.T) {
	ctx := context.Background()
	s := batch.NewSequence((&counter{last: new(atomic.Int64)}).reserve, 4)
	defer s.Close()

	dst := []int64{-1}
	dst, err := s.Take(ctx, 0, dst)
	require.NoError(t, err)
	require.Equal(t, []int64{-1}, dst)
	for _, n := range []int{1, 2, 3, 1, 5, 4, 9} {
		dst, err = s.Take(ctx, n, dst)
		require.NoError(t, err)
	}
	require.Equal(t, append([]int64{-1}, seqRange(1, 25)...), dst)
}

func TestTakeSpansBlocks(t *testing.T) {
	ctx := context.Background()
	r := newScripted()
	s := batch.NewSequence(r.reserve, 4)
	defer s.Close()

	res := takeAsync(ctx, s, 10)
	for _, last := range []int64{4, 8, 12} {
		c := r.next()
		require.EqualValues(t, 4, c.n)
		c.answer(last, nil)
	}
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, seqRange(1, 10), got.seqs)
	r.requireIdle(t) // three blocks, and two seqs left is above the low-water mark of one
}

func TestDefaultBlockSize(t *testing.T) {
	r := newScripted()
	s := batch.NewSequence(r.reserve, 0)
	defer s.Close()
	res := takeAsync(context.Background(), s, 1)
	c := r.next()
	require.EqualValues(t, 256, c.n, "the default NewSequence documents")
	c.answer(256, nil)
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, []int64{1}, got.seqs)
}

func TestPrefetch(t *testing.T) {
	ctx := context.Background()
	r := newScripted()
	s := batch.NewSequence(r.reserve, 8) // low-water mark: 2
	defer s.Close()

	res := takeAsync(ctx, s, 7)
	r.next().answer(8, nil)
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, seqRange(1, 7), got.seqs)

	// One seq left: the next block is being reserved in the background.
	prefetch := r.next()
	require.NoError(t, prefetch.ctx.Err())

	// The seq left is handed out while that reservation is still unanswered.
	seqs, err := s.Take(ctx, 1, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{8}, seqs)
	r.requireIdle(t)

	prefetch.answer(16, nil)
	// The prefetched block serves the next Take, with no reservation of its own.
	seqs, err = s.Take(ctx, 3, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{9, 10, 11}, seqs)
	r.requireIdle(t)
	require.EqualValues(t, 1, r.maxInFlight.Load())
}

func TestPrefetchIntoSpare(t *testing.T) {
	ctx := context.Background()
	r := newScripted()
	s := batch.NewSequence(r.reserve, 8)
	defer s.Close()

	res := takeAsync(ctx, s, 7)
	r.next().answer(8, nil)
	require.NoError(t, (<-res).err)

	// The prefetched block arrives while seq 8 is still unused: it waits as the spare.
	r.next().answer(16, nil)
	seqs, err := s.Take(ctx, 9, nil)
	require.NoError(t, err)
	require.Equal(t, seqRange(8, 16), seqs)

	// The spare is used up too; the next Take waits for a new block.
	res = takeAsync(ctx, s, 1)
	r.next().answer(24, nil)
	got := <-res
	require.NoError(t, got.err)
	require.Equal(t, []int64{17}, got.seqs)
}

func TestOneReservationInFlight(t *testing.T) {
	ctx := context.Background()
	r := newScripted()
	s := batch.NewSequence(r.reserve, 8)
	defer s.Close()

	res := takeAsync(ctx, s, 8)
	r.next().answer(8, nil)
	require.NoError(t, (<-res).err)
	prefetch := r.next() // the block ran out

	// Takes with nothing left wait on the reservation in flight rather than start another.
	const waiters = 4
	results := make([]<-chan taken, waiters)
	for i := range results {
		w := watch(ctx)
		results[i] = takeAsync(w, s, 1)
		<-w.waiting
	}
	r.requireIdle(t)
	prefetch.answer(16, nil)

	var seqs []int64
	for _, res := range results {
		got := <-res
		require.NoError(t, got.err)
		seqs = append(seqs, got.seqs...)
	}
	slices.Sort(seqs)
	require.Equal(t, seqRange(9, 12), seqs)
	r.requireIdle(t)
	require.EqualValues(t, 1, r.maxInFlight.Load())
}

func TestReserveFails(t *testing.T) {
	ctx := context.Background()
	boom := errors.New("counter unavailable")

	t.Run("waiting Takes", func(t *testing.T) {
		r := newScripted()
		s := batch.NewSequence(r.reserve, 8)
		defer s.Close()

		a := watch(ctx)
		resA := takeAsync(a, s, 1)
		c := r.next()
		<-a.waiting
		b := watch(ctx)
		resB := takeAsync(b, s, 1)
		<-b.waiting
		c.answer(0, boom)
		require.ErrorIs(t, (<-resA).err, boom)
		require.ErrorIs(t, (<-resB).err, boom)
		r.requireIdle(t)

		// Nothing was reserved: the next Take tries again, and gets the first seq.
		resC := takeAsync(ctx, s, 1)
		r.next().answer(8, nil)
		got := <-resC
		require.NoError(t, got.err)
		require.Equal(t, []int64{1}, got.seqs)
	})

	t.Run("prefetch", func(t *testing.T) {
		r := newScripted()
		s := batch.NewSequence(r.reserve, 8)
		defer s.Close()

		res := takeAsync(ctx, s, 7)
		r.next().answer(8, nil)
		require.NoError(t, (<-res).err)
		prefetch := r.next()
		seqs, err := s.Take(ctx, 1, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{8}, seqs)

		w := watch(ctx)
		res = takeAsync(w, s, 1)
		<-w.waiting
		prefetch.answer(0, boom)
		require.ErrorIs(t, (<-res).err, boom)

		res = takeAsync(ctx, s, 1)
		r.next().answer(16, nil)
		got := <-res
		require.NoError(t, got.err)
		require.Equal(t, []int64{9}, got.seqs)
	})
}

func TestTakeContextEnds(t *testing.T) {
	r := newScripted()
	s := batch.NewSequence(r.reserve, 8)
	defer s.Close()

	ctx, cancel := context.WithCancel(context.Background())
	w := watch(ctx)
	res := takeAsync(w, s, 3)
	c := r.next()
	<-w.waiting
	cancel()
	require.ErrorIs(t, (<-res).err, context.Canceled)

	// The reservation does not depend on the caller's context, and its block is kept.
	require.NoError(t, c.ctx.Err())
	c.answer(8, nil)
	seqs, err := s.Take(context.Background(), 3, nil)
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3}, seqs)
	r.requireIdle(t)
}

func TestClose(t *testing.T) {
	t.Run("idle", func(t *testing.T) {
		s := batch.NewSequence(newScripted().reserve, 8)
		s.Close()
		s.Close()
	})

	t.Run("reservation in flight", func(t *testing.T) {
		r := newScripted()
		s := batch.NewSequence(r.reserve, 8)
		w := watch(context.Background())
		res := takeAsync(w, s, 1)
		c := r.next()
		<-w.waiting

		closed := make(chan struct{})
		go func() {
			s.Close()
			close(closed)
		}()
		<-c.ctx.Done()
		select {
		case <-closed:
			t.Fatal("Close returned before the reservation in flight ended")
		default:
		}
		c.answer(0, c.ctx.Err())
		<-closed
		require.ErrorIs(t, (<-res).err, context.Canceled)
	})

	t.Run("Take after Close", func(t *testing.T) {
		c := &counter{last: new(atomic.Int64)}
		s := batch.NewSequence(c.reserve, 8)
		seqs, err := s.Take(context.Background(), 1, nil)
		require.NoError(t, err)
		require.Equal(t, []int64{1}, seqs)
		s.Close()

		// Seqs already reserved are still handed out; no new block is reserved.
		seqs, err = s.Take(context.Background(), 7, nil)
		require.NoError(t, err)
		require.Equal(t, seqRange(2, 8), seqs)
		_, err = s.Take(context.Background(), 1, nil)
		require.ErrorIs(t, err, context.Canceled)
		require.EqualValues(t, 1, c.calls.Load())
	})

	t.Run("Take racing Close", func(t *testing.T) {
		s := batch.NewSequence((&counter{last: new(atomic.Int64)}).reserve, 1)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for {
					if _, err := s.Take(context.Background(), 1, nil); err != nil {
						assert.ErrorIs(t, err, context.Canceled)
						return
					}
				}
			})
		}
		s.Close()
		wg.Wait()
	})
}

// takeRecord is one Take: the seqs it returned and when it started and returned, on a clock
// shared by every goroutine.
type takeRecord struct {
	seqs       []int64
	start, end int64
}

// TestConcurrentTakes runs two Sequences over one shared counter, as two processes would,
// with many goroutines each. Every seq handed out must be unique, and within a Sequence a
// Take that starts after another returned must get larger seqs.
func TestConcurrentTakes(t *testing.T) {
	const goroutines, takes = 8, 300
	shared := new(atomic.Int64)
	counters := []*counter{{last: shared}, {last: shared}}
	var clock atomic.Int64

	records := make([][]takeRecord, len(counters))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, c := range counters {
		s := batch.NewSequence(c.reserve, 16)
		defer s.Close()
		for g := range goroutines {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(i), uint64(g)))
				var mine []takeRecord
				var dst []int64
				for range takes {
					n := 1 + rng.IntN(20)
					start := clock.Add(1)
					seqs, err := s.Take(context.Background(), n, dst[:0])
					end := clock.Add(1)
					if err != nil {
						t.Error(err)
						return
					}
					if len(seqs) != n || !slices.IsSorted(seqs) {
						t.Errorf("Take(%d) = %v", n, seqs)
						return
					}
					mine = append(mine, takeRecord{slices.Clone(seqs), start, end})
					dst = seqs
				}
				mu.Lock()
				records[i] = append(records[i], mine...)
				mu.Unlock()
			})
		}
	}
	wg.Wait()

	seen := make(map[int64]int)
	for i, recs := range records {
		require.Len(t, recs, goroutines*takes)
		for _, r := range recs {
			for _, v := range r.seqs {
				if prev, dup := seen[v]; dup {
					t.Fatalf("seq %d handed out by Sequence %d and Sequence %d", v, prev, i)
				}
				seen[v] = i
			}
		}
		requireOrdered(t, recs)
		require.EqualValues(t, 1, counters[i].maxInFlight.Load(), "reservations in flight at once")
	}
}

// requireOrdered fails unless every Take in recs that started after another returned got
// only larger seqs.
func requireOrdered(t *testing.T, recs []takeRecord) {
	t.Helper()
	byEnd := slices.Clone(recs)
	slices.SortFunc(byEnd, func(a, b takeRecord) int { return cmp.Compare(a.end, b.end) })
	// maxBefore[i] is the largest seq of byEnd[:i+1].
	maxBefore := make([]int64, len(byEnd))
	var m int64
	for i, r := range byEnd {
		m = max(m, r.seqs[len(r.seqs)-1])
		maxBefore[i] = m
	}
	for _, r := range recs {
		// Takes that returned before r started are byEnd[:k].
		k, _ := slices.BinarySearchFunc(byEnd, r.start, func(e takeRecord, start int64) int {
			return cmp.Compare(e.end, start)
		})
		if k > 0 && maxBefore[k-1] >= r.seqs[0] {
			t.Fatalf("Take started at %d got %d, not above seq %d of an earlier Take", r.start, r.seqs[0], maxBefore[k-1])
		}
	}
}

func BenchmarkTake(b *testing.B) {
	for _, n := range []int{1, 16} {
		b.Run("n="+strconv.Itoa(n), func(b *testing.B) {
			s := batch.NewSequence((&counter{last: new(atomic.Int64)}).reserve, 0)
			defer s.Close()
			ctx := context.Background()
			dst := make([]int64, 0, n)
			b.ReportAllocs()
			for b.Loop() {
				var err error
				if dst, err = s.Take(ctx, n, dst[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}

	b.Run("parallel", func(b *testing.B) {
		s := batch.NewSequence((&counter{last: new(atomic.Int64)}).reserve, 0)
		defer s.Close()
		ctx := context.Background()
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			dst := make([]int64, 0, 1)
			for pb.Next() {
				var err error
				if dst, err = s.Take(ctx, 1, dst[:0]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}
