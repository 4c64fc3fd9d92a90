// Package hedge sends a command a second time when its first answer is late, and takes the
// answer that comes first. It is for the commands of a wake-up (a store's write of marks on
// its board, a relay's read of its marks and its targeted read of the executions they name),
// whose lateness is a delivery's lateness: a server's single slow command (a new backend
// connection, a stalled statement) then costs one more command instead of the wait.
//
// What always holds:
//   - A call is sent at most twice, the second only once the first has not answered within
//     Calls.Delay, and never after the caller's context ended.
//   - The caller gets the first answer that is not a failure; when both fail (or the first
//     fails before the delay, which sends no second), the last failure. Of a read, either
//     answer is a read of the server at some time between the call and its return, as one
//     read is.
//   - The call not taken is not cancelled (a cancelled command costs its connection): it ends
//     with its own answer or with the caller's context; Calls.Wait waits for it. Both may
//     apply, in either order, and after the caller returned: only reads, and writes that
//     change nothing when applied again, late, are hedged (the board's marks, which a holder
//     takes once by their Seq).
package hedge

import (
	"context"
	"sync"
	"time"

	"github.com/execstore/execstore/internal/latency"
)

// The delay before a second send: delayFactor times the median of the recent answers'
// latencies, and at least Floor.
const (
	// DefaultFloor is Calls.Floor's default: no call is hedged sooner. A point read or write
	// on a server of the same network takes a few milliseconds; 25ms keeps hedges to the slow
	// tail.
	DefaultFloor = 25 * time.Millisecond
	delayFactor  = 4
)

// Calls is one kind of call's recent latencies, from which it sets the delay of a hedge.
// Its zero value is ready, with Floor DefaultFloor. It is safe for concurrent use.
type Calls struct {
	Floor time.Duration // the least delay; 0 for DefaultFloor

	running sync.WaitGroup // the sends not ended

	latencies latency.Window // the answers' latencies

	mu     sync.Mutex
	hedged int64 // second sends made
}

// Delay is how long a call waits for its first answer before a second send: 4 times the
// median of the last 32 answers' latencies, once 8 came, and at least Floor.
func (c *Calls) Delay() time.Duration {
	floor := c.Floor
	if floor <= 0 {
		floor = DefaultFloor
	}
	if m, ok := c.latencies.Median(); ok {
		return max(floor, delayFactor*m)
	}
	return floor
}

// Wait waits until every send made has ended, the ones not taken too.
func (c *Calls) Wait() { c.running.Wait() }

// Hedged returns how many second sends were made.
func (c *Calls) Hedged() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hedged
}

func (c *Calls) hedge() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hedged++
}

type answer[T any] struct {
	v   T
	err error
}

// Call runs send, and runs it once more if no answer came within c.Delay(); it returns the
// first answer that is not a failure, else the last failure. It returns at once with ctx's
// error when ctx ends first; the sends made end on their own, with ctx.
func Call[T any](ctx context.Context, c *Calls, send func(context.Context) (T, error)) (T, error) {
	out := make(chan answer[T], 2) // buffered: an answer not taken never blocks
	run := func() {
		defer c.running.Done()
		start := time.Now()
		v, err := send(ctx)
		if err == nil {
			c.latencies.Observe(time.Since(start))
		}
		out <- answer[T]{v, err}
	}
	c.running.Add(1)
	go run()
	late := time.NewTimer(c.Delay())
	defer late.Stop()
	sent := 1
	for {
		select {
		case a := <-out:
			sent--
			if a.err == nil || sent == 0 {
				return a.v, a.err
			}
		case <-late.C:
			if ctx.Err() == nil {
				c.hedge()
				sent++
				c.running.Add(1)
				go run()
			}
		case <-ctx.Done():
			var zero T
			return zero, ctx.Err()
		}
	}
}
