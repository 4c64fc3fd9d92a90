package async

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/execstore/execstore"
	pool "github.com/execstore/execstore/internal/workers"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorded counts outcomes by kind.
type recorded struct {
	mu   sync.Mutex
	errs map[int][]error
}

func (r *recorded) Record(kind int, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.errs == nil {
		r.errs = map[int][]error{}
	}
	r.errs[kind] = append(r.errs[kind], err)
}

func (r *recorded) count(kind int) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.errs[kind])
}

// A request runs on a worker, its result reaches the future, and its outcome is recorded.
func TestRequestRuns(t *testing.T) {
	p := pool.New(pool.Config{Workers: 1, QueueDepth: 4})
	defer p.Close(context.Background())
	rec := &recorded{}
	f := NewRequest(rec, 3, func(ctx context.Context) (int, error) { return 7, nil }).Submit(context.Background(), p, false)
	v, err := f.Wait(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 7, v)
	assert.Equal(t, 1, rec.count(3))
}

// A caller whose context ends while its request is still queued gets the context's error at
// once, and the request never runs.
func TestQueuedRequestIsWithdrawn(t *testing.T) {
	p := pool.New(pool.Config{Workers: 1, QueueDepth: 4})
	defer p.Close(context.Background())
	rec := &recorded{}
	block := make(chan struct{})
	busy := NewRequest(rec, 0, func(ctx context.Context) (int, error) { <-block; return 0, nil }).Submit(context.Background(), p, false)
	ran := false
	ctx, cancel := context.WithCancel(context.Background())
	queued := NewRequest(rec, 1, func(ctx context.Context) (int, error) { ran = true; return 1, nil }).Submit(ctx, p, false)
	cancel()
	_, err := queued.Wait(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	close(block)
	_, err = busy.Wait(context.Background())
	require.NoError(t, err)
	assert.False(t, ran, "a withdrawn request ran")
}

// Shedding: a full queue refuses at once with ErrOverloaded, recorded.
func TestShedWhenFull(t *testing.T) {
	p := pool.New(pool.Config{Workers: 1, QueueDepth: 1})
	defer p.Close(context.Background())
	rec := &recorded{}
	block := make(chan struct{})
	var futures []*Future[int]
	for range 4 {
		futures = append(futures, NewRequest(rec, 0, func(ctx context.Context) (int, error) { <-block; return 0, nil }).
			Submit(context.Background(), p, true))
	}
	var overloaded int
	for _, f := range futures {
		select {
		case <-f.Done():
			_, err := f.Result()
			if errors.Is(err, execstore.ErrOverloaded) {
				overloaded++
			}
		default:
		}
	}
	assert.Positive(t, overloaded)
	close(block)
	for _, f := range futures {
		<-f.Done()
	}
}

// handedOff returns a future already handed to a coalescer, the handoff, and what the
// withdraw path recorded.
func handedOff(t *testing.T) (*Future[int], *Handoff, *[]error) {
	t.Helper()
	f := newFuture[int](nil)
	var recordedErrs []error
	h := f.HandTo(func(ctxErr error) error {
		return &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: "x", Err: ctxErr}
	}, func(err error) { recordedErrs = append(recordedErrs, err) })
	return f, h, &recordedErrs
}

// A handed-off operation whose caller gives up before the flush sends it is withdrawn: the
// caller gets its context's error, and the flush finds it gone.
func TestHandoffWithdrawnBeforeSend(t *testing.T) {
	f, h, errs := handedOff(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.Wait(ctx)
	assert.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, execstore.ErrOutcomeUnknown)
	assert.False(t, h.Send(), "the flush must skip a withdrawn operation")
	assert.Len(t, *errs, 1)
}

// A caller who gives up after the flush sent its operation gets the abandon error at once,
// and the flush may no longer settle it.
func TestHandoffAbandonedAfterSend(t *testing.T) {
	f, h, _ := handedOff(t)
	require.True(t, h.Send())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.Wait(ctx)
	assert.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, h.Settle(), "the flush must not touch an abandoned operation")
}

// The flush that sent and settles an operation wins over a caller who gives up later.
func TestHandoffSettled(t *testing.T) {
	f, h, _ := handedOff(t)
	require.True(t, h.Send())
	require.True(t, h.Settle())
	f.Set(5, nil)
	v, err := f.Wait(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 5, v)
	h.Refuse(errors.New("too late")) // no effect once sent
}

type item struct {
	ctx  context.Context
	hand *Handoff
}

// TakeLive sends what is still wanted and refuses, never sending, what is not.
func TestTakeLive(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	mk := func(ctx context.Context) (item, *Future[int]) {
		f, h, _ := handedOff(t)
		return item{ctx: ctx, hand: h}, f
	}
	live, liveFut := mk(context.Background())
	dead, deadFut := mk(ended)
	items := []item{live, dead}
	got, ctxs := TakeLive(context.Background(), items, func(it item) context.Context { return it.ctx },
		func(it item) *Handoff { return it.hand })
	require.Len(t, got, 1)
	assert.Len(t, ctxs, 1)
	_, err := deadFut.Result()
	assert.ErrorIs(t, err, context.Canceled)
	select {
	case <-liveFut.Done():
		t.Fatal("a live item was settled")
	default:
	}

	stopped, stop := context.WithCancel(context.Background())
	stop()
	closing, closingFut := mk(context.Background())
	got, _ = TakeLive(stopped, []item{closing}, func(it item) context.Context { return it.ctx },
		func(it item) *Handoff { return it.hand })
	assert.Empty(t, got)
	_, err = closingFut.Result()
	assert.ErrorIs(t, err, execstore.ErrClosed)
}

// AllDone ends when every caller's context has ended, or when stop ends. In virtual time.
func TestAllDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, cancelA := context.WithCancel(context.Background())
		b, cancelB := context.WithCancel(context.Background())
		ctx, release := AllDone(context.Background(), []context.Context{a, b})
		cancelA()
		synctest.Wait() // what cancelA starts runs until it blocks
		select {
		case <-ctx.Done():
			t.Fatal("ended while a caller still waits")
		default:
		}
		cancelB()
		<-ctx.Done()
		release()

		stop, cancelStop := context.WithCancel(context.Background())
		ctx, release = AllDone(stop, []context.Context{context.Background()})
		cancelStop()
		<-ctx.Done()
		release()
	})
}

// CallerCause restates a batch's cancellation in this caller's terms.
func TestCallerCause(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Nanosecond)
	defer cancel()
	<-ctx.Done()
	unknown := &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: "x", Err: context.Canceled}
	err := CallerCause(ctx, unknown)
	assert.ErrorIs(t, err, execstore.ErrOutcomeUnknown)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.ErrorIs(t, CallerCause(ctx, context.Canceled), context.DeadlineExceeded)
	other := errors.New("refused")
	assert.Equal(t, other, CallerCause(ctx, other))
	assert.Equal(t, unknown, CallerCause(context.Background(), unknown))

	// What the error names is kept: an idempotency key stays one.
	key := &execstore.OutcomeUnknownError{Op: "claim", ExecutionID: "k", Noun: "idempotency key", Err: context.Canceled}
	var got *execstore.OutcomeUnknownError
	require.ErrorAs(t, CallerCause(ctx, key), &got)
	assert.Equal(t, "idempotency key", got.Noun)
	assert.Equal(t, "k", got.ExecutionID)
	assert.ErrorIs(t, got, context.DeadlineExceeded)
	assert.Contains(t, got.Error(), `claim of idempotency key "k"`)
}
