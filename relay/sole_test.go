package relay_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
)

// soleLease is the LeaseDuration of the sole-lease tests: short, so that a take-over comes
// within seconds; the waits allow several of it (waitLong).
const soleLease = 2 * time.Second

// standByLog records the errors a relay reports, and tells the ErrStandingBy ones apart.
type standByLog struct {
	mu       sync.Mutex
	standBys []*relay.Error
}

func (l *standByLog) onError(err error) {
	var re *relay.Error
	if errors.Is(err, relay.ErrStandingBy) && errors.As(err, &re) {
		l.mu.Lock()
		l.standBys = append(l.standBys, re)
		l.mu.Unlock()
	}
}

func (l *standByLog) reported() []*relay.Error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*relay.Error(nil), l.standBys...)
}

// soleCalls records a relay's handler calls, across relays: every call of each entry, and
// any call of an entry that began while another call of it was in progress.
type soleCalls struct {
	mu       sync.Mutex
	calls    map[string]int
	busy     map[string]bool
	overlaps []string
}

func newSoleCalls() *soleCalls {
	return &soleCalls{calls: map[string]int{}, busy: map[string]bool{}}
}

func (d *soleCalls) handle(_ context.Context, e execstore.OutboxEntry) error {
	id := entryID(e.SourceID, e.Seq)
	d.mu.Lock()
	if d.busy[id] {
		d.overlaps = append(d.overlaps, id)
	}
	d.busy[id] = true
	d.calls[id]++
	d.mu.Unlock()
	time.Sleep(time.Millisecond) // long enough for a second relay's call of the entry to overlap
	d.mu.Lock()
	d.busy[id] = false
	d.mu.Unlock()
	return nil
}

// delivered reports whether every entry of ids was handed to a handler.
func (d *soleCalls) delivered(ids []string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		if d.calls[id] == 0 {
			return false
		}
	}
	return true
}

// Two relays without a lease over two aio stores of one database: the first holds the sole
// lease and delivers every entry; the second stands by and says so (ErrStandingBy, once, in
// OnError and Stats), and no entry's handler calls overlap. Once the first stops, the second
// takes over and delivers what is committed after.
func TestSoleRelayStandsBy(t *testing.T) {
	store, another := backends[1].open(t) // aio: a store per process over one database
	storeB := another()
	d := newSoleCalls()
	var logA, logB standByLog
	a := relay.New(store, d.handle, relay.Options{LeaseDuration: soleLease, OnError: logA.onError})
	stopA := run(t, a)
	eventually(t, func() bool { return a.Stats().Holding }, "a holds the sole lease")
	b := relay.New(storeB, d.handle, relay.Options{LeaseDuration: soleLease, OnError: logB.onError})
	stopB := run(t, b)
	eventually(t, func() bool { return len(logB.reported()) == 1 }, "b stands by")

	const n = 40
	em := newEmitter(t, store)
	var first []string
	for i := range n {
		src := fmt.Sprintf("s%02d", i%8)
		first = append(first, entryID(src, em.emit(src, "T", "first")))
	}
	eventually(t, func() bool { return d.delivered(first) && pending(t, store) == 0 }, "every entry delivered and acked")
	assert.Zero(t, b.Stats().Delivered, "b delivers nothing while a holds the sole lease")
	assert.False(t, b.Stats().Holding)
	assert.Equal(t, store.(execstore.Partitioned).Partitions(), a.Stats().Partitions, "a holds every partition under the sole lease")
	reported := logB.reported()
	require.Len(t, reported, 1, "b reports its stand-by once")
	assert.Equal(t, relay.OpClaim, reported[0].Op)
	assert.Equal(t, "execstore/relay/outbox/sole", reported[0].Item)
	assert.Empty(t, logA.reported())

	require.NoError(t, stopA())
	var second []string
	for i := range n {
		src := fmt.Sprintf("s%02d", i%8)
		second = append(second, entryID(src, em.emit(src, "T", "second")))
	}
	eventually(t, func() bool { return d.delivered(second) && pending(t, store) == 0 },
		"b takes over once a stopped, and delivers what was committed after")
	assert.True(t, b.Stats().Holding)
	assert.Len(t, logB.reported(), 1, "b reported its one stand-by only")
	require.NoError(t, stopB())
	d.mu.Lock()
	defer d.mu.Unlock()
	assert.Empty(t, d.overlaps, "no entry's handler calls overlap")
	for _, id := range append(first, second...) {
		assert.Equal(t, 1, d.calls[id], "%s delivered once", id)
	}
}

// Two sweepers without a lease over two aio stores of one database: one fires every due
// timer, the other stands by, and takes over once the first stops.
func TestSoleSweeperStandsBy(t *testing.T) {
	store, another := backends[1].open(t)
	storeB := another()
	f := newFirings(t)
	var logB standByLog
	a := relay.NewSweeper(store, f.handle, relay.Options{LeaseDuration: soleLease})
	stopA := run(t, a)
	eventually(t, func() bool { return a.Stats().Holding }, "a holds the sole lease")
	b := relay.NewSweeper(storeB, f.handle, relay.Options{LeaseDuration: soleLease, OnError: logB.onError})
	stopB := run(t, b)
	eventually(t, func() bool { return len(logB.reported()) == 1 }, "b stands by")
	assert.Equal(t, "execstore/relay/timers/sole", logB.reported()[0].Item)

	em := newEmitter(t, store)
	const n = 10
	for i := range n {
		em.schedule(fmt.Sprintf("x%d", i), "T", nowFireTime().Add(-time.Second))
	}
	eventually(t, func() bool { return a.Stats().Acked == n }, "a fires every due timer")
	assert.Zero(t, b.Stats().Delivered)

	require.NoError(t, stopA())
	for i := range n {
		em.schedule(fmt.Sprintf("y%d", i), "T", nowFireTime().Add(-time.Second))
	}
	eventually(t, func() bool { return b.Stats().Acked == n }, "b takes over once a stopped")
	require.NoError(t, stopB())
	f.check()
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Len(t, f.fired, 2*n)
	for tm, calls := range f.fired {
		assert.Equal(t, 1, calls, "%v fired once", tm)
	}
	assert.Empty(t, timers(t, store))
}

// A relay without a lease over a store that offers no lease store (memstore) delivers as it
// did: it neither claims nor stands by.
func TestSoleNotOfferedDeliversAll(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		d := newSoleCalls()
		a := relay.New(store, d.handle, relay.Options{LeaseDuration: soleLease})
		b := relay.New(store, d.handle, relay.Options{LeaseDuration: soleLease})
		run(t, a)
		run(t, b)
		settleUntil(t, func() bool { return a.Stats().Holding && b.Stats().Holding }, "both deliver")
		assert.Zero(t, a.Stats().Leases+b.Stats().Leases)
	})
}
