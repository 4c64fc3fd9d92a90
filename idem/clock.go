package idem

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/connect"
)

// serverClock estimates the server's clock from readings of it, for the FerretDB formulation
// (MongoDB's uses $$NOW in the write itself). A reading is $$NOW in an aggregate where the
// server serves it (server.NowInReads), else hello's localTime (see the package doc for why
// $$NOW comes first).
//
// A reading sends its command at local instant t0 and gets the answer at t1; the server read its
// clock somewhere in between, so taking the midpoint m, the server's time at a later local
// instant t is S + (t − m) within
//
//	ε = (t1 − t0)/2 + 1ms (localTime's resolution)
//
// plus the drift of the two clocks' rates since the reading (a few ms per minute at the
// worst rates hardware clocks show, hence Options.ClockRefresh). Every local instant and
// interval here is read from Go's monotonic clock (time.Now's monotonic reading), never from
// the application's clock (Options.Clock) nor its wall time, so no offset or step of those
// moves the estimate: a lease is never written to end early, nor read as lapsed early,
// because a clock stepped. The application's clock is only watched: when the time it says
// has elapsed since the reading disagrees with the monotonic clock by more than
// clockDisagreement (it stepped, or was set), the next claim reads the server's clock again.
// The reading with the smallest ε seen since the last refresh is kept.
type serverClock struct {
	ask     func(ctx context.Context) (bson.DateTime, error) // one reading of the server's clock
	now     func() time.Time                                 // the application's clock, watched for steps
	refresh time.Duration

	mu      sync.Mutex
	server  time.Time     // the server's localTime
	mono    time.Time     // the midpoint it is taken to belong to, on the monotonic clock
	local   time.Time     // the application's clock at that midpoint
	eps     time.Duration // the reading's ε
	present bool
}

// clockDisagreement is how far the application's clock may stray from the monotonic clock
// since a reading before the reading is taken again: far above what a clock's slewing can
// account for within ClockRefresh, far below any step that matters to a lease.
const clockDisagreement = 100 * time.Millisecond

// monoNow is the monotonic clock's now (time.Now's reading carries it).
var monoNow = time.Now

// read returns the estimated server time and its error bound.
func (c *serverClock) read() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server.Add(monoNow().Sub(c.mono)), c.eps
}

// stale reports whether the reading is missing, older than the refresh interval, or belied
// by the application's clock.
func (c *serverClock) stale() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.present || c.staleLocked()
}

func (c *serverClock) staleLocked() bool {
	elapsed := monoNow().Sub(c.mono)
	if elapsed > c.refresh {
		return true
	}
	skew := c.now().Sub(c.local) - elapsed
	return skew > clockDisagreement || skew < -clockDisagreement
}

// sample reads the server's clock once and keeps the reading when the current one is stale,
// or when it is tighter.
func (c *serverClock) sample(ctx context.Context) error {
	t0 := monoNow()
	server, err := c.ask(ctx)
	if err != nil {
		return fmt.Errorf("idem: reading the server's clock: %w", err)
	}
	t1 := monoNow()
	local := c.now()
	rtt := t1.Sub(t0)
	eps := rtt/2 + time.Millisecond
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.present || c.staleLocked() || eps <= c.eps {
		c.server, c.mono, c.local, c.eps, c.present = server.Time(), t0.Add(rtt/2), local.Add(-rtt/2), eps, true
	}
	return nil
}

// helloClock reads the server's clock as hello's localTime.
func helloClock(db *mongo.Database) func(context.Context) (bson.DateTime, error) {
	return func(ctx context.Context) (bson.DateTime, error) {
		var hello struct {
			LocalTime bson.DateTime `bson:"localTime"`
		}
		if err := db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
			return 0, err
		}
		if hello.LocalTime == 0 {
			return 0, errors.New("hello has no localTime")
		}
		return hello.LocalTime, nil
	}
}

// nowClock reads the server's clock as $$NOW in an aggregate.
func nowClock(db *mongo.Database) func(context.Context) (bson.DateTime, error) {
	return func(ctx context.Context) (bson.DateTime, error) {
		reply, err := db.RunCommand(ctx, connect.NowInReadsCommand()).Raw()
		if err != nil {
			return 0, err
		}
		return connect.NowOf(reply)
	}
}

// current returns the server time and its bound, reading the server's clock first when
// the reading is stale.
func (c *serverClock) current(ctx context.Context) (time.Time, time.Duration, error) {
	if c.stale() {
		if err := c.sample(ctx); err != nil {
			return time.Time{}, 0, err
		}
	}
	now, eps := c.read()
	return now, eps, nil
}
