package hedge

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/execstore/execstore/internal/latency"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errRead = errors.New("read failed")

// step is one read's behaviour: how long it takes and what it answers.
type step struct {
	after time.Duration
	v     int
	err   error
}

// reads returns a read that answers the i-th call as steps[i], and counts its calls.
func reads(steps ...step) (func(context.Context) (int, error), *atomic.Int32) {
	var calls atomic.Int32
	return func(ctx context.Context) (int, error) {
		s := steps[calls.Add(1)-1]
		select {
		case <-time.After(s.after):
			return s.v, s.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}, &calls
}

func TestCall(t *testing.T) {
	const floor = DefaultFloor
	cases := []struct {
		name   string
		steps  []step
		want   int
		err    error
		calls  int32
		took   time.Duration // from the call to its return, in the bubble's time
		hedged int64
	}{
		{name: "an answer within the delay sends no second read",
			steps: []step{{after: floor - time.Millisecond, v: 1}},
			want:  1, calls: 1, took: floor - time.Millisecond},
		{name: "a late answer sends a second read, whose answer comes first",
			steps: []step{{after: time.Second, v: 1}, {after: 5 * time.Millisecond, v: 2}},
			want:  2, calls: 2, took: floor + 5*time.Millisecond, hedged: 1},
		{name: "the first answer is taken when it comes before the second's",
			steps: []step{{after: floor + 2*time.Millisecond, v: 1}, {after: time.Second, v: 2}},
			want:  1, calls: 2, took: floor + 2*time.Millisecond, hedged: 1},
		{name: "a failure within the delay is the answer: no second read",
			steps: []step{{after: time.Millisecond, err: errRead}},
			err:   errRead, calls: 1, took: time.Millisecond},
		{name: "a late failure waits for the second read",
			steps: []step{{after: floor + time.Millisecond, err: errRead}, {after: 10 * time.Millisecond, v: 2}},
			want:  2, calls: 2, took: floor + 10*time.Millisecond, hedged: 1},
		{name: "a late first read waits for the second read's failure, then is taken",
			steps: []step{{after: floor + 20*time.Millisecond, v: 1}, {after: time.Millisecond, err: errRead}},
			want:  1, calls: 2, took: floor + 20*time.Millisecond, hedged: 1},
		{name: "two failures give the last",
			steps: []step{{after: floor + time.Millisecond, err: errRead}, {after: 5 * time.Millisecond, err: context.DeadlineExceeded}},
			err:   context.DeadlineExceeded, calls: 2, took: floor + 5*time.Millisecond, hedged: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				read, calls := reads(c.steps...)
				var r Calls
				start := time.Now()
				v, err := Call(t.Context(), &r, read)
				took := time.Since(start)
				if c.err != nil {
					require.ErrorIs(t, err, c.err)
				} else {
					require.NoError(t, err)
					assert.Equal(t, c.want, v)
				}
				assert.Equal(t, c.took, took)
				r.Wait() // the send not taken ends on its own
				assert.Equal(t, c.calls, calls.Load())
				assert.Equal(t, c.hedged, r.Hedged())
			})
		})
	}
}

func TestCallReturnsWhenTheContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		read, calls := reads(step{after: time.Hour}, step{after: time.Hour})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		var r Calls
		start := time.Now()
		_, err := Call(ctx, &r, read)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Second, time.Since(start))
		synctest.Wait() // both reads ended with ctx: no goroutine is left
		assert.Equal(t, int32(2), calls.Load())
	})
}

func TestNoSecondSendAfterTheContextEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		var r Calls
		read := func(context.Context) (int, error) {
			calls.Add(1)
			cancel() // the context ends while the first read is out; it still answers late
			time.Sleep(time.Second)
			return 1, nil
		}
		_, err := Call(ctx, &r, read)
		require.ErrorIs(t, err, context.Canceled)
		synctest.Wait()
		assert.Equal(t, int32(1), calls.Load())
		assert.Zero(t, r.Hedged())
		time.Sleep(time.Second) // the read answers, late, and its goroutine ends
	})
}

func TestDelayFollowsTheMedian(t *testing.T) {
	var r Calls
	assert.Equal(t, DefaultFloor, r.Delay(), "no latency known: the floor")
	for range latency.DefaultMin - 1 {
		r.latencies.Observe(20 * time.Millisecond)
	}
	assert.Equal(t, DefaultFloor, r.Delay(), "fewer than 8 known: the floor")
	r.latencies.Observe(20 * time.Millisecond)
	assert.Equal(t, 80*time.Millisecond, r.Delay(), "4 times the median")
	for range latency.DefaultSize {
		r.latencies.Observe(time.Millisecond)
	}
	assert.Equal(t, DefaultFloor, r.Delay(), "the old latencies left the window; never below the floor")
	r.Floor = time.Millisecond
	assert.Equal(t, 4*time.Millisecond, r.Delay())
	for i := range latency.DefaultSize {
		r.latencies.Observe(time.Duration(i+1) * time.Millisecond) // 1..32ms: the median is 17ms
	}
	assert.Equal(t, 68*time.Millisecond, r.Delay())
}
