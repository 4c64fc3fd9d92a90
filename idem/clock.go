package idem

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// serverClock estimates the server's clock from readings of hello's localTime, for the
// FerretDB formulation (MongoDB's uses $$NOW in the write itself).
//
// A reading sends hello at local instant t0 and gets the answer at t1, both from the
// application's clock; the server read its clock somewhere in between, so taking the
// midpoint m, the server's time at a later local instant t is S + (t − m) within
//
//	ε = (t1 − t0)/2 + 1ms (localTime's resolution)
//
// plus the drift of the two clocks' rates since the reading (a few ms per minute at the
// worst rates hardware clocks show, hence Options.ClockRefresh). Only the elapsed time
// t − m is taken from the application's clock, and Go measures it on the monotonic clock,
// so the application's wall clock may be off by hours or days, or jump, without effect.
// The reading with the smallest ε seen since the last refresh is kept.
type serverClock struct {
	db      *mongo.Database
	now     func() time.Time
	refresh time.Duration

	mu      sync.Mutex
	server  time.Time     // the server's localTime
	local   time.Time     // the local midpoint it is taken to belong to
	eps     time.Duration // the reading's ε
	present bool
}

// now returns the estimated server time and its error bound.
func (c *serverClock) read() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.server.Add(c.now().Sub(c.local)), c.eps
}

// stale reports whether the reading is older than the refresh interval (or missing).
func (c *serverClock) stale() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.present || c.now().Sub(c.local) > c.refresh
}

// sample reads the server's clock once and keeps the reading when it is fresher than the
// refresh interval allows the current one to be, or tighter.
func (c *serverClock) sample(ctx context.Context) error {
	t0 := c.now()
	var hello struct {
		LocalTime bson.DateTime `bson:"localTime"`
	}
	if err := c.db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return fmt.Errorf("idem: reading the server's clock: %w", err)
	}
	t1 := c.now()
	if hello.LocalTime == 0 {
		return fmt.Errorf("idem: reading the server's clock: hello has no localTime")
	}
	rtt := t1.Sub(t0)
	eps := rtt/2 + time.Millisecond
	mid := t0.Add(rtt / 2)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.present || c.now().Sub(c.local) > c.refresh || eps <= c.eps {
		c.server, c.local, c.eps, c.present = hello.LocalTime.Time(), mid, eps, true
	}
	return nil
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
