package workers_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/execstore/execstore"
	pool "github.com/execstore/execstore/internal/workers"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// probe is a Task that counts how often the pool runs and aborts it.
type probe struct {
	env    pool.Envelope
	body   func(ctx context.Context) // optional; runs inside Run
	runs   atomic.Int32
	aborts atomic.Int32
	err    error // the error of the last Abort; read it after done
	once   sync.Once
	done   chan struct{} // closed once Run has returned or Abort was called
}

func newProbe(body func(ctx context.Context)) *probe {
	return &probe{body: body, done: make(chan struct{})}
}

func (p *probe) Run(ctx context.Context) {
	p.runs.Add(1)
	if p.body != nil {
		p.body(ctx)
	}
	p.once.Do(func() { close(p.done) })
}

func (p *probe) Abort(err error) {
	p.aborts.Add(1)
	p.err = err
	p.once.Do(func() { close(p.done) })
}

// requireUntouched fails unless the pool neither ran nor aborted p.
func requireUntouched(t *testing.T, p *probe) {
	t.Helper()
	require.Zero(t, p.runs.Load(), "runs")
	require.Zero(t, p.aborts.Load(), "aborts")
}

// requireRanOnce fails unless the pool ran p exactly once and never aborted it.
func requireRanOnce(t *testing.T, p *probe) {
	t.Helper()
	<-p.done
	require.EqualValues(t, 1, p.runs.Load(), "runs")
	require.Zero(t, p.aborts.Load(), "aborts")
}

// requireAborted fails unless the pool aborted p exactly once with want and never ran it.
func requireAborted(t *testing.T, p *probe, want error) {
	t.Helper()
	<-p.done
	require.Zero(t, p.runs.Load(), "runs")
	require.EqualValues(t, 1, p.aborts.Load(), "aborts")
	require.ErrorIs(t, p.err, want)
}

// saturated is a pool whose workers are all held by blocking tasks and whose request channel
// is full.
type saturated struct {
	blockers []*probe // running, one per worker
	handoff  *probe   // taken off the channel, waiting for a free worker
	queued   []*probe // in the channel, in submit order
	release  chan struct{}
}

// saturate fills p, built with cfg, as described by saturated. The blocking tasks return when
// release is closed or their context ends.
func saturate(t *testing.T, p *pool.Pool, cfg pool.Config) *saturated {
	t.Helper()
	ctx := context.Background()
	s := &saturated{release: make(chan struct{})}
	started := make(chan struct{}, cfg.Workers)
	for range cfg.Workers {
		b := newProbe(func(ctx context.Context) {
			started <- struct{}{}
			select {
			case <-s.release:
			case <-ctx.Done():
			}
		})
		require.NoError(t, p.Submit(ctx, &b.env, b))
		s.blockers = append(s.blockers, b)
	}
	for range cfg.Workers {
		<-started
	}
	s.handoff = newProbe(nil)
	require.NoError(t, p.Submit(ctx, &s.handoff.env, s.handoff))
	require.Eventually(t, func() bool { return p.Len() == 0 }, 10*time.Second, time.Millisecond)
	for range cfg.QueueDepth {
		q := newProbe(nil)
		require.NoError(t, p.TrySubmit(ctx, &q.env, q))
		s.queued = append(s.queued, q)
	}
	require.Equal(t, cfg.QueueDepth, p.Len())
	return s
}

// waiting returns every task of s that has not started.
func (s *saturated) waiting() []*probe { return append([]*probe{s.handoff}, s.queued...) }

func TestWorkersBound(t *testing.T) {
	const workers, tasks = 3, 40
	p := pool.New(pool.Config{Workers: workers, QueueDepth: tasks})
	var running, highWater atomic.Int32
	started := make(chan struct{}, tasks)
	release := make(chan struct{})
	probes := make([]*probe, tasks)
	for i := range probes {
		probes[i] = newProbe(func(context.Context) {
			n := running.Add(1)
			for {
				h := highWater.Load()
				if n <= h || highWater.CompareAndSwap(h, n) {
					break
				}
			}
			started <- struct{}{}
			<-release
			running.Add(-1)
		})
		require.NoError(t, p.Submit(context.Background(), &probes[i].env, probes[i]))
	}
	for range workers {
		<-started
	}
	require.Equal(t, workers, p.InFlight())
	close(release)
	require.NoError(t, p.Close(context.Background()))
	for _, pr := range probes {
		requireRanOnce(t, pr)
	}
	assert.EqualValues(t, workers, highWater.Load(), "most tasks seen running at once")
	assert.Zero(t, p.InFlight())
	assert.Zero(t, p.Len())
}

func TestSubmitBlocksWhileFull(t *testing.T) {
	cfg := pool.Config{Workers: 2, QueueDepth: 3}

	t.Run("context ends", func(t *testing.T) {
		p := pool.New(cfg)
		s := saturate(t, p, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		late := newProbe(nil)
		res := make(chan error, 1)
		go func() { res <- p.Submit(ctx, &late.env, late) }()
		cancel()
		require.ErrorIs(t, <-res, context.Canceled)
		require.Equal(t, cfg.QueueDepth, p.Len())

		close(s.release)
		require.NoError(t, p.Close(context.Background()))
		requireUntouched(t, late)
	})

	t.Run("room appears", func(t *testing.T) {
		p := pool.New(cfg)
		s := saturate(t, p, cfg)
		late := newProbe(nil)
		res := make(chan error, 1)
		go func() { res <- p.Submit(context.Background(), &late.env, late) }()
		close(s.release)
		require.NoError(t, <-res)
		require.NoError(t, p.Close(context.Background()))
		requireRanOnce(t, late)
	})

	t.Run("pool closes", func(t *testing.T) {
		p := pool.New(cfg)
		s := saturate(t, p, cfg)
		late := newProbe(nil)
		res := make(chan error, 1)
		go func() { res <- p.Submit(context.Background(), &late.env, late) }()
		closed := make(chan error, 1)
		go func() { closed <- p.Close(context.Background()) }()
		require.ErrorIs(t, <-res, execstore.ErrClosed)
		close(s.release)
		require.NoError(t, <-closed)
		requireUntouched(t, late)
	})
}

func TestTrySubmitOverloaded(t *testing.T) {
	cfg := pool.Config{Workers: 1, QueueDepth: 2}
	p := pool.New(cfg)
	s := saturate(t, p, cfg)
	shed := newProbe(nil)
	require.ErrorIs(t, p.TrySubmit(context.Background(), &shed.env, shed), execstore.ErrOverloaded)
	close(s.release)
	require.NoError(t, p.Close(context.Background()))
	requireUntouched(t, shed)
	for _, q := range s.waiting() {
		requireRanOnce(t, q)
	}
}

func TestSubmitEndedContext(t *testing.T) {
	p := pool.New(pool.Config{Workers: 1, QueueDepth: 1})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pr := newProbe(nil)
	require.ErrorIs(t, p.Submit(ctx, &pr.env, pr), context.Canceled)
	require.ErrorIs(t, p.TrySubmit(ctx, &pr.env, pr), context.Canceled)
	require.NoError(t, p.Close(context.Background()))
	requireUntouched(t, pr)
}

func TestQueuedTaskContextEnds(t *testing.T) {
	p := pool.New(pool.Config{Workers: 1, QueueDepth: 4})
	started, release := make(chan struct{}), make(chan struct{})
	blocker := newProbe(func(context.Context) {
		close(started)
		<-release
	})
	require.NoError(t, p.Submit(context.Background(), &blocker.env, blocker))
	<-started

	// atHandoff leaves the channel and waits for the busy worker; queued stays in the channel.
	handoffCtx, cancelHandoff := context.WithCancel(context.Background())
	queuedCtx, cancelQueued := context.WithCancel(context.Background())
	atHandoff, queued, live := newProbe(nil), newProbe(nil), newProbe(nil)
	require.NoError(t, p.Submit(handoffCtx, &atHandoff.env, atHandoff))
	require.Eventually(t, func() bool { return p.Len() == 0 }, 10*time.Second, time.Millisecond)
	require.NoError(t, p.Submit(queuedCtx, &queued.env, queued))
	require.NoError(t, p.Submit(context.Background(), &live.env, live))
	cancelHandoff()
	cancelQueued()

	close(release)
	require.NoError(t, p.Close(context.Background()))
	requireRanOnce(t, blocker)
	requireAborted(t, atHandoff, context.Canceled)
	requireAborted(t, queued, context.Canceled)
	requireRanOnce(t, live)
}

func TestWithdraw(t *testing.T) {
	cfg := pool.Config{Workers: 1, QueueDepth: 2}
	p := pool.New(cfg)
	s := saturate(t, p, cfg)

	// A task still waiting, in the channel or for a free worker, can be taken back.
	require.True(t, s.handoff.env.Withdraw(), "task waiting for a worker")
	require.True(t, s.queued[0].env.Withdraw(), "task in the channel")
	require.False(t, s.queued[0].env.Withdraw(), "second withdraw")
	// A running task cannot.
	require.False(t, s.blockers[0].env.Withdraw(), "running task")

	close(s.release)
	require.NoError(t, p.Close(context.Background()))
	requireRanOnce(t, s.blockers[0])
	requireUntouched(t, s.handoff)
	requireUntouched(t, s.queued[0])
	requireRanOnce(t, s.queued[1])
	require.False(t, s.queued[1].env.Withdraw(), "finished task")
}

// TestWithdrawOnTime checks the use Withdraw exists for: with every worker busy, a caller
// whose context ends gets its task back instead of waiting for a worker.
func TestWithdrawOnTime(t *testing.T) {
	cfg := pool.Config{Workers: 2, QueueDepth: 2}
	p := pool.New(cfg)
	s := saturate(t, p, cfg)
	for _, w := range s.waiting() {
		require.True(t, w.env.Withdraw())
	}
	close(s.release)
	require.NoError(t, p.Close(context.Background()))
	for _, w := range s.waiting() {
		requireUntouched(t, w)
	}
}

// TestExactlyOnce stresses the pool with many producers, random cancellation and
// withdrawal, and counts that every accepted task that was not withdrawn is run or aborted
// exactly once, and that no other task is touched.
func TestExactlyOnce(t *testing.T) {
	const producers, perProducer = 16, 400
	p := pool.New(pool.Config{Workers: 4, QueueDepth: 8})

	type outcome struct {
		pr        *probe
		accepted  bool
		withdrawn bool
	}
	results := make([][]outcome, producers)
	var wg sync.WaitGroup
	for i := range producers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 0x5eed))
			out := make([]outcome, perProducer)
			var live []context.CancelFunc
			defer func() {
				for _, cancel := range live {
					cancel()
				}
			}()
			for j := range out {
				ctx, cancel := context.WithCancel(context.Background())
				slow := j%7 == 0
				pr := newProbe(func(ctx context.Context) {
					if slow {
						<-ctx.Done() // returns when its caller gives up, below
					}
				})
				if rng.IntN(8) == 0 {
					cancel() // before submit
				}
				var err error
				if rng.IntN(2) == 0 {
					err = p.Submit(ctx, &pr.env, pr)
				} else {
					err = p.TrySubmit(ctx, &pr.env, pr)
				}
				out[j] = outcome{pr: pr, accepted: err == nil}
				switch {
				case err == nil:
				case errors.Is(err, context.Canceled), errors.Is(err, execstore.ErrOverloaded):
				default:
					t.Errorf("submit: unexpected error %v", err)
				}
				switch {
				case slow || rng.IntN(3) == 0:
					cancel() // the task may be queued, about to start or running
				case rng.IntN(2) == 0:
					cancel()
					if out[j].accepted {
						out[j].withdrawn = pr.env.Withdraw()
					}
				default:
					live = append(live, cancel)
				}
			}
			results[i] = out
		})
	}
	wg.Wait()
	require.NoError(t, p.Close(context.Background()))

	var accepted, withdrawn, ran, aborted int
	for _, out := range results {
		for _, o := range out {
			runs, aborts := int(o.pr.runs.Load()), int(o.pr.aborts.Load())
			ran += runs
			aborted += aborts
			switch {
			case !o.accepted || o.withdrawn:
				require.Zero(t, runs+aborts, "a task that was refused or withdrawn was touched")
			default:
				require.Equal(t, 1, runs+aborts, "runs %d, aborts %d", runs, aborts)
			}
			if o.accepted {
				accepted++
			}
			if o.withdrawn {
				withdrawn++
			}
		}
	}
	t.Logf("accepted %d, withdrawn %d, ran %d, aborted %d", accepted, withdrawn, ran, aborted)
	require.Equal(t, accepted-withdrawn, ran+aborted)
}

func TestCloseDrains(t *testing.T) {
	cfg := pool.Config{Workers: 2, QueueDepth: 5}
	p := pool.New(cfg)
	s := saturate(t, p, cfg)
	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()

	// The channel is full, so TrySubmit reports ErrOverloaded until Close starts.
	extra := newProbe(nil)
	require.Eventually(t, func() bool {
		return errors.Is(p.TrySubmit(context.Background(), &extra.env, extra), execstore.ErrClosed)
	}, 10*time.Second, time.Millisecond)
	require.ErrorIs(t, p.Submit(context.Background(), &extra.env, extra), execstore.ErrClosed)

	close(s.release)
	require.NoError(t, <-closed)
	for _, b := range s.blockers {
		requireRanOnce(t, b)
	}
	for _, w := range s.waiting() {
		requireRanOnce(t, w)
	}
	requireUntouched(t, extra)

	require.NoError(t, p.Close(context.Background()), "second Close")
	require.ErrorIs(t, p.Submit(context.Background(), &extra.env, extra), execstore.ErrClosed)
	require.ErrorIs(t, p.TrySubmit(context.Background(), &extra.env, extra), execstore.ErrClosed)
}

func TestCloseGivesUp(t *testing.T) {
	defer goleak.VerifyNone(t)
	cfg := pool.Config{Workers: 2, QueueDepth: 3}
	p := pool.New(cfg)
	s := saturate(t, p, cfg) // s.release is never closed: the blockers return only when cancelled

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, p.Close(ctx), context.Canceled)

	for _, b := range s.blockers {
		requireRanOnce(t, b)
	}
	for _, w := range s.waiting() {
		requireAborted(t, w, execstore.ErrClosed)
	}
	assert.Zero(t, p.InFlight())
	require.NoError(t, p.Close(context.Background()), "second Close")
}

func TestCloseGivesUpCancelsRunning(t *testing.T) {
	p := pool.New(pool.Config{Workers: 1, QueueDepth: 1})
	started := make(chan struct{})
	var seen error
	pr := newProbe(func(ctx context.Context) {
		close(started)
		<-ctx.Done()
		seen = ctx.Err()
	})
	require.NoError(t, p.Submit(context.Background(), &pr.env, pr))
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, p.Close(ctx), context.Canceled)
	requireRanOnce(t, pr)
	require.ErrorIs(t, seen, context.Canceled)
}

func TestPanickingTask(t *testing.T) {
	p := pool.New(pool.Config{Workers: 1, QueueDepth: 4})
	bad := newProbe(func(context.Context) { panic("boom") })
	good := newProbe(nil)
	require.NoError(t, p.Submit(context.Background(), &bad.env, bad))
	require.NoError(t, p.Submit(context.Background(), &good.env, good))
	<-bad.done
	require.EqualValues(t, 1, bad.runs.Load())
	require.EqualValues(t, 1, bad.aborts.Load())
	require.ErrorContains(t, bad.err, "boom")
	requireRanOnce(t, good)
	require.NoError(t, p.Close(context.Background()))
}

func TestLenInFlight(t *testing.T) {
	cfg := pool.Config{Workers: 2, QueueDepth: 3}
	p := pool.New(cfg)
	require.Zero(t, p.Len())
	require.Zero(t, p.InFlight())

	s := saturate(t, p, cfg)
	require.Equal(t, cfg.Workers, p.InFlight())
	require.Equal(t, cfg.QueueDepth, p.Len())

	close(s.release)
	require.NoError(t, p.Close(context.Background()))
	require.Zero(t, p.Len())
	require.Zero(t, p.InFlight())
}

func TestDefaults(t *testing.T) {
	p := pool.New(pool.Config{})
	var running atomic.Int32
	started := make(chan struct{}, pool.DefaultWorkers)
	release := make(chan struct{})
	probes := make([]*probe, pool.DefaultWorkers)
	for i := range probes {
		probes[i] = newProbe(func(context.Context) {
			running.Add(1)
			started <- struct{}{}
			<-release
		})
		require.NoError(t, p.TrySubmit(context.Background(), &probes[i].env, probes[i]))
	}
	for range probes {
		<-started
	}
	require.Equal(t, pool.DefaultWorkers, p.InFlight())
	for i := range pool.DefaultQueueDepth {
		pr := newProbe(nil)
		require.NoError(t, p.TrySubmit(context.Background(), &pr.env, pr), "task %d", i)
	}
	close(release)
	require.NoError(t, p.Close(context.Background()))
	require.EqualValues(t, pool.DefaultWorkers, running.Load())
}

// nopTask is the cheapest task: it only reports that it ended.
type nopTask struct {
	env pool.Envelope
	wg  *sync.WaitGroup
}

func (t *nopTask) Run(context.Context) { t.wg.Done() }
func (t *nopTask) Abort(error)         { t.wg.Done() }

// nopTasks allocates n tasks up front, so that a benchmark counts only the pool's own
// allocations.
func nopTasks(n int, wg *sync.WaitGroup) []nopTask {
	ts := make([]nopTask, n)
	for i := range ts {
		ts[i].wg = wg
	}
	return ts
}

func BenchmarkSubmit(b *testing.B) {
	ctx := context.Background()

	b.Run("pipelined", func(b *testing.B) {
		p := pool.New(pool.Config{})
		var wg sync.WaitGroup
		ts := nopTasks(b.N, &wg)
		wg.Add(b.N)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range ts {
			if err := p.Submit(ctx, &ts[i].env, &ts[i]); err != nil {
				b.Fatal(err)
			}
		}
		wg.Wait()
		b.StopTimer()
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
	})

	b.Run("roundtrip", func(b *testing.B) {
		p := pool.New(pool.Config{})
		var wg sync.WaitGroup
		ts := nopTasks(b.N, &wg)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range ts {
			wg.Add(1)
			if err := p.Submit(ctx, &ts[i].env, &ts[i]); err != nil {
				b.Fatal(err)
			}
			wg.Wait()
		}
		b.StopTimer()
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
	})

	b.Run("parallel", func(b *testing.B) {
		p := pool.New(pool.Config{})
		var wg sync.WaitGroup
		ts := nopTasks(b.N, &wg)
		wg.Add(b.N)
		var next atomic.Int64
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				t := &ts[next.Add(1)-1]
				if err := p.Submit(ctx, &t.env, t); err != nil {
					b.Error(err)
					return
				}
			}
		})
		wg.Wait()
		b.StopTimer()
		if err := p.Close(ctx); err != nil {
			b.Fatal(err)
		}
	})
}
