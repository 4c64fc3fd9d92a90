package idem

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/server"
)

// steppingClock is an application clock whose wall time a test steps. Its readings carry no
// monotonic reading, as a clock set by hand or by a time daemon would not.
type steppingClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *steppingClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Round(0).Add(c.offset)
}

func (c *steppingClock) set(offset time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.offset = offset
}

// clockStores opens two stores on one database with the FerretDB formulation (the one that
// estimates the server's clock), the first with clk as its application clock.
func clockStores(t *testing.T, clk *steppingClock) (stepped, steady *Store) {
	db := testDatabase(t)
	stepped = openStore(t, Options{Connection: server.Connection{Database: db, Profile: server.FerretDB}, Clock: clk.now, ReapInterval: -1})
	steady = openStore(t, Options{Connection: server.Connection{Database: db, Profile: server.FerretDB}, ReapInterval: -1})
	return stepped, steady
}

// assertLive asserts that each store sees key's claim as live.
func assertLive(t *testing.T, key string, stores ...*Store) {
	t.Helper()
	for i, s := range stores {
		c, err := s.Claim(bg, key, fp, 1, longLease)
		require.NoError(t, err)
		assert.Equal(t, AlreadyClaimed, c.Outcome, "store %d took over a live claim of %q", i, key)
	}
}

// An application clock stepped back an hour makes no claim's lease end in the past: the
// claim it makes stays live for both stores, before and after the clock is set right.
func TestClockStepBackKeepsLiveClaim(t *testing.T) {
	clk := &steppingClock{}
	stepped, steady := clockStores(t, clk)
	clk.set(-time.Hour)
	c, err := stepped.Claim(bg, "back", fp, 1, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, New, c.Outcome)
	assertLive(t, "back", steady, stepped)
	clk.set(0)
	assertLive(t, "back", steady, stepped)
	ok, err := stepped.Renew(bg, "back", c.Token, 30*time.Second)
	require.NoError(t, err)
	assert.True(t, ok)
}

// An application clock stepped forward by less than ClockRefresh (45 s) does not take over
// another store's live 30 s claim, and neither does it once the step is undone.
func TestClockStepForwardKeepsOthersClaim(t *testing.T) {
	clk := &steppingClock{}
	stepped, steady := clockStores(t, clk)
	c, err := steady.Claim(bg, "forward", fp, 1, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, New, c.Outcome)
	clk.set(45 * time.Second)
	assertLive(t, "forward", stepped)
	clk.set(0)
	assertLive(t, "forward", stepped, steady)
}

// A claim made while the application clock was stepped forward keeps its lease by the
// server's clock once the step is undone: the other store sees it live, its holder renews it.
func TestClockStepUndoneKeepsOwnClaim(t *testing.T) {
	clk := &steppingClock{}
	stepped, steady := clockStores(t, clk)
	clk.set(45 * time.Second)
	c, err := stepped.Claim(bg, "undone", fp, 1, 30*time.Second)
	require.NoError(t, err)
	require.Equal(t, New, c.Outcome)
	clk.set(0)
	assertLive(t, "undone", steady, stepped)
	rec, err := steady.Get(bg, "undone")
	require.NoError(t, err)
	require.NotNil(t, rec)
	assert.False(t, rec.Lapsed)
	ref, err := steady.Claim(bg, "reference", fp, 1, 30*time.Second)
	require.NoError(t, err)
	assert.WithinDuration(t, ref.Record.Until, rec.Until, 5*time.Second,
		"the lease ends 30 s from the claim on the server's clock, not 45 s later")
}
