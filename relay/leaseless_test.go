package relay_test

import (
	"context"
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

// leaselessDuration is the LeaseDuration of the tests of relays without a lease: short, so
// that a take-over comes within seconds; the waits allow several of it (waitLong).
const leaselessDuration = 2 * time.Second

// leaselessCalls records a relay's handler calls, across relays: every call of each entry, and
// any call of an entry that began while another call of it was in progress.
type leaselessCalls struct {
	mu       sync.Mutex
	calls    map[string]int
	busy     map[string]bool
	overlaps []string
}

func newLeaselessCalls() *leaselessCalls {
	return &leaselessCalls{calls: map[string]int{}, busy: map[string]bool{}}
}

func (d *leaselessCalls) handle(_ context.Context, e execstore.OutboxEntry) error {
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
func (d *leaselessCalls) delivered(ids []string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range ids {
		if d.calls[id] == 0 {
			return false
		}
	}
	return true
}

// Two relays without a lease over two aio stores of one database lease in the store's lease
// store: they share the partitions, and no entry's handler calls overlap. Once the first
// stops, the second holds every partition and delivers what is committed after.
func TestLeaselessRelaysShare(t *testing.T) {
	store, another := backends[1].open(t) // aio: a store per process over one database
	storeB := another()
	parts := store.(execstore.Partitioned).Partitions()
	d := newLeaselessCalls()
	a := relay.New(store, d.handle, relay.Options{LeaseDuration: leaselessDuration})
	stopA := run(t, a)
	eventually(t, func() bool { return a.Stats().Partitions == parts }, "a holds every partition")
	b := relay.New(storeB, d.handle, relay.Options{LeaseDuration: leaselessDuration})
	stopB := run(t, b)
	eventually(t, func() bool {
		sa, sb := a.Stats(), b.Stats()
		return sb.Partitions > 0 && sa.Partitions+sb.Partitions == parts
	}, "a hands b its share")

	const n = 40
	em := newEmitter(t, store)
	var first []string
	for i := range n {
		src := fmt.Sprintf("s%02d", i%8)
		first = append(first, entryID(src, em.emit(src, "T", "first")))
	}
	eventually(t, func() bool { return d.delivered(first) && pending(t, store) == 0 }, "every entry delivered and acked")
	assert.Positive(t, a.Stats().Leases)
	assert.Positive(t, b.Stats().Leases)

	require.NoError(t, stopA())
	eventually(t, func() bool { return b.Stats().Partitions == parts }, "b takes a's partitions once a stopped")
	var second []string
	for i := range n {
		src := fmt.Sprintf("s%02d", i%8)
		second = append(second, entryID(src, em.emit(src, "T", "second")))
	}
	eventually(t, func() bool { return d.delivered(second) && pending(t, store) == 0 },
		"b delivers what was committed after")
	require.NoError(t, stopB())
	d.mu.Lock()
	defer d.mu.Unlock()
	assert.Empty(t, d.overlaps, "no entry's handler calls overlap")
	for _, id := range append(first, second...) {
		assert.Equal(t, 1, d.calls[id], "%s delivered once", id)
	}
}

// Two sweepers without a lease over two aio stores of one database share the partitions:
// every due timer fires once, and once the first stops the second fires them all.
func TestLeaselessSweepersShare(t *testing.T) {
	store, another := backends[1].open(t)
	storeB := another()
	parts := store.(execstore.Partitioned).Partitions()
	f := newFirings(t)
	a := relay.NewSweeper(store, f.handle, relay.Options{LeaseDuration: leaselessDuration})
	stopA := run(t, a)
	b := relay.NewSweeper(storeB, f.handle, relay.Options{LeaseDuration: leaselessDuration})
	stopB := run(t, b)
	eventually(t, func() bool {
		sa, sb := a.Stats(), b.Stats()
		return sa.Partitions > 0 && sb.Partitions > 0 && sa.Partitions+sb.Partitions == parts
	}, "a and b share the partitions")

	em := newEmitter(t, store)
	const n = 10
	for i := range n {
		em.schedule(fmt.Sprintf("x%d", i), "T", nowFireTime().Add(-time.Second))
	}
	eventually(t, func() bool { return a.Stats().Acked+b.Stats().Acked == n }, "every due timer fired")

	require.NoError(t, stopA())
	eventually(t, func() bool { return b.Stats().Partitions == parts }, "b takes a's partitions once a stopped")
	for i := range n {
		em.schedule(fmt.Sprintf("y%d", i), "T", nowFireTime().Add(-time.Second))
	}
	eventually(t, func() bool { return a.Stats().Acked+b.Stats().Acked == 2*n }, "b fires what comes due after")
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

// A relay without a lease over a store that offers no lease store (memstore) holds every
// partition, whatever other relays do, and claims nothing.
func TestLeaselessNotOffered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		d := newLeaselessCalls()
		a := relay.New(store, d.handle, relay.Options{LeaseDuration: leaselessDuration})
		b := relay.New(store, d.handle, relay.Options{LeaseDuration: leaselessDuration})
		run(t, a)
		run(t, b)
		settleUntil(t, func() bool { return a.Stats().Holding && b.Stats().Holding }, "both deliver")
		assert.Zero(t, a.Stats().Leases+b.Stats().Leases)
	})
}
