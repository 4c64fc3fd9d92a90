package memstore_test

import (
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
	"github.com/execstore/execstore/storetest"
)

var _ relay.Leases = (*memstore.Leases)(nil)

// openLeases returns a new Leases with opts, closed when t ends.
func openLeases(t *testing.T, opts memstore.LeasesOptions) *memstore.Leases {
	l := memstore.NewLeases(opts)
	t.Cleanup(func() { _ = l.Close(bg) })
	return l
}

// The lease suite, on the wall clock: the in-memory leases keep what *idem.Store keeps.
func TestLeasesConformance(t *testing.T) {
	storetest.RunLeases(t, func(t *testing.T) storetest.LeaseStore { return openLeases(t, memstore.LeasesOptions{}) })
}

// The lease suite in a testing/synctest bubble, where time.Now, the default clock, is the
// bubble's: its waits for leases to lapse take no wall time.
func TestLeasesConformanceInABubble(t *testing.T) {
	wall := time.Now()
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		storetest.CheckLeases(t, func(t *testing.T) storetest.LeaseStore { return openLeases(t, memstore.LeasesOptions{}) })
		assert.GreaterOrEqual(t, time.Since(start), 4*time.Second, "the suite waited for its leases by the bubble's clock")
	})
	t.Logf("the suite took %v", time.Since(wall))
}

// manualClock is a clock the test moves.
type manualClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// A lease lapses at its Until by the store's clock, not a nanosecond before: a claim then
// reclaims it, and List shows it lapsed. Times are whole milliseconds, as an idem.Store
// keeps them: ClaimedAt rounded down, Until up.
func TestLeasesClock(t *testing.T) {
	t0 := time.Date(2030, time.January, 2, 3, 4, 5, 600_400_000, time.UTC) // 600.4 ms
	clock := &manualClock{now: t0}
	l := openLeases(t, memstore.LeasesOptions{Clock: clock.Now})

	c, err := l.ClaimAs(bg, "k", "fp", 1, time.Second+time.Microsecond, "a")
	require.NoError(t, err)
	require.Equal(t, idem.New, c.Outcome)
	assert.Equal(t, t0.Truncate(time.Millisecond), c.Record.ClaimedAt)
	until := t0.Truncate(time.Millisecond).Add(time.Millisecond + 1001*time.Millisecond)
	assert.Equal(t, until, c.Record.Until, "now and the lease rounded up to the millisecond")

	clock.Set(until.Add(-time.Nanosecond))
	recs, err := l.List(bg, "k", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.False(t, recs[0].Lapsed)
	other, err := l.ClaimAs(bg, "k", "fp", 1, time.Second, "b")
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyClaimed, other.Outcome)

	clock.Set(until)
	recs, err = l.List(bg, "k", 0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Lapsed)
	other, err = l.ClaimAs(bg, "k", "fp", 1, time.Second, "b")
	require.NoError(t, err)
	assert.Equal(t, idem.LeaseReclaimed, other.Outcome)
	assert.Equal(t, until, other.Record.ClaimedAt)
	assert.Equal(t, until.Add(time.Second), other.Record.Until)

	// A renewal counts from the clock's now; a completion's retention too.
	clock.Set(until.Add(500 * time.Millisecond))
	renewed, err := l.RenewAll(bg, []idem.Held{{Key: "k", Token: other.Token}}, time.Minute)
	require.NoError(t, err)
	assert.Equal(t, []bool{true}, renewed)
	recs, err = l.List(bg, "k", 0)
	require.NoError(t, err)
	assert.Equal(t, until.Add(500*time.Millisecond+time.Minute), recs[0].Until)
	done := until.Add(time.Second)
	clock.Set(done)
	ok, err := l.Complete(bg, "k", other.Token, idem.Response{Status: 200}, time.Hour)
	require.NoError(t, err)
	require.True(t, ok)
	clock.Set(done.Add(time.Hour - time.Nanosecond))
	c, err = l.ClaimAs(bg, "k", "fp", 1, time.Second, "c")
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyCompleted, c.Outcome)
	assert.Equal(t, done, c.Record.CompletedAt)
	assert.Equal(t, done.Add(time.Hour), c.Record.Until)
	clock.Set(done.Add(time.Hour))
	c, err = l.ClaimAs(bg, "k", "fp", 1, time.Second, "c")
	require.NoError(t, err)
	assert.Equal(t, idem.New, c.Outcome, "a completed record past its retention is absent")
}

// In a bubble a lease lapses when the bubble's clock reaches its end: a simulation's leases
// follow its virtual time exactly.
func TestLeasesLapseInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := openLeases(t, memstore.LeasesOptions{})
		c, err := l.ClaimAs(t.Context(), "k", "fp", 1, 10*time.Second, "a")
		require.NoError(t, err)
		require.Equal(t, idem.New, c.Outcome)
		time.Sleep(10*time.Second - time.Millisecond)
		other, err := l.ClaimAs(t.Context(), "k", "fp", 1, time.Second, "b")
		require.NoError(t, err)
		assert.Equal(t, idem.AlreadyClaimed, other.Outcome)
		time.Sleep(time.Millisecond)
		other, err = l.ClaimAs(t.Context(), "k", "fp", 1, time.Second, "b")
		require.NoError(t, err)
		assert.Equal(t, idem.LeaseReclaimed, other.Outcome)
	})
}

// The store deletes completed records past their retention as it grows. That changes
// nothing a call sees: lapsed claims stay (and are reclaimed, not new), live completed
// records stay, and List keeps its order.
func TestLeasesSweepKeepsWhatIsRead(t *testing.T) {
	t0 := time.Date(2030, time.January, 1, 0, 0, 0, 0, time.UTC)
	clock := &manualClock{now: t0}
	l := openLeases(t, memstore.LeasesOptions{Clock: clock.Now})
	complete := func(key string, retention time.Duration) {
		t.Helper()
		c, err := l.ClaimAs(bg, key, "fp", 1, time.Second, "h")
		require.NoError(t, err)
		require.Equal(t, idem.New, c.Outcome, key)
		ok, err := l.Complete(bg, key, c.Token, idem.Response{Status: 200}, retention)
		require.NoError(t, err)
		require.True(t, ok)
	}
	for i := range 100 {
		complete(fmt.Sprintf("gone/%03d", i), time.Second)
		complete(fmt.Sprintf("kept/%03d", i), time.Hour)
		_, err := l.ClaimAs(bg, fmt.Sprintf("lapsed/%03d", i), "fp", 1, time.Second, "h")
		require.NoError(t, err)
	}
	clock.Set(t0.Add(time.Minute))
	for i := range 1000 {
		complete(fmt.Sprintf("new/%04d", i), time.Hour)
	}

	gone, err := l.List(bg, "gone/", 0)
	require.NoError(t, err)
	assert.Empty(t, gone)
	for _, prefix := range []string{"kept/", "lapsed/"} {
		recs, err := l.List(bg, prefix, 0)
		require.NoError(t, err)
		require.Len(t, recs, 100, prefix)
		for i, r := range recs {
			assert.Equal(t, fmt.Sprintf("%s%03d", prefix, i), r.Key)
		}
	}
	c, err := l.ClaimAs(bg, "lapsed/007", "fp", 1, time.Second, "h")
	require.NoError(t, err)
	assert.Equal(t, idem.LeaseReclaimed, c.Outcome)
	c, err = l.ClaimAs(bg, "gone/007", "fp", 1, time.Second, "h")
	require.NoError(t, err)
	assert.Equal(t, idem.New, c.Outcome)
	all, err := l.List(bg, "new/", 0)
	require.NoError(t, err)
	assert.Len(t, all, 1000)
}

// NewLeases refuses a body bound an idem.Store refuses.
func TestNewLeasesRefusesBadMaxBodyBytes(t *testing.T) {
	for _, n := range []int{-1, idem.MaxBodyLimit + 1} {
		assert.Panics(t, func() { memstore.NewLeases(memstore.LeasesOptions{MaxBodyBytes: n}) }, "%d", n)
	}
	l := openLeases(t, memstore.LeasesOptions{MaxBodyBytes: 4})
	c, err := l.ClaimAs(bg, "k", "fp", 1, time.Minute, "")
	require.NoError(t, err)
	_, err = l.Complete(bg, "k", c.Token, idem.Response{Status: 200, Body: []byte("12345")}, time.Hour)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	ok, err := l.Complete(bg, "k", c.Token, idem.Response{Status: 200, Body: []byte("1234")}, time.Hour)
	require.NoError(t, err)
	assert.True(t, ok)
}
