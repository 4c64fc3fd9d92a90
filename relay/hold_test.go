package relay

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
)

// A hold stops handing items out at the first stop, or earlier when its lease stopped being
// live before it: nothing is handed out past that (session.handing). In virtual time.
func TestHoldStopsWhenItsLeaseStopsBeingLive(t *testing.T) {
	const dur = 12 * time.Second // margin 2s
	for _, tc := range []struct {
		name string
		// before runs before the stop, and returns when the hold stopped handing items out
		// (zero: at the stop).
		before func(ls *lease) time.Time
	}{
		{"live", func(*lease) time.Time { return time.Time{} }},
		{"not live: a renewal is late", func(ls *lease) time.Time {
			pause(ls)
			end := ls.liveUntil()
			time.Sleep(ls.margin() / 4)
			return end
		}},
		{"run out, not yet dropped as lost", func(ls *lease) time.Time {
			time.Sleep(dur + time.Second)
			return ls.base.Add(dur - ls.margin())
		}},
		{"live again: the late renewal came back", func(ls *lease) time.Time {
			pause(ls)
			time.Sleep(ls.margin() / 4)
			resume(ls)
			return time.Time{}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ls := &lease{key: "k", dur: dur, base: time.Now()}
				ls.until.Store(int64(dur))
				h := newHold(context.Background(), 0, ls, &gens{})
				time.Sleep(time.Second)
				want := tc.before(ls)
				now := time.Now()
				if want.IsZero() {
					want = now
				}
				h.stop(now)
				assert.Equal(t, want, h.stoppedAt)
				time.Sleep(time.Second)
				h.stop(time.Now())
				assert.Equal(t, want, h.stoppedAt, "a second stop changes nothing")
			})
		})
	}
	t.Run("no lease", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			h := newHold(context.Background(), 0, nil, &gens{})
			time.Sleep(time.Hour)
			h.stop(time.Now())
			assert.Equal(t, time.Now(), h.stoppedAt)
		})
	})
}

// A relay's renewals fail, and its lease of a partition lapses; another relay claims the
// partition, and only then does the first hand it over (a relay joined), before its renewer
// dropped the lease as run out. The first gave the partition up when its lease stopped being
// live, before the other took it: the two holds, as OnPartition tells them, do not overlap.
// (The simulation found them overlapping when the hand-over's time was taken as the end.)
// In virtual time.
func TestHandOverAfterTheLeaseLapsedEndsWhereItStoppedBeingLive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dur = 3 * time.Second
		store := memstore.NewLeases(memstore.LeasesOptions{})
		var mu sync.Mutex
		var events []PartitionEvent
		b := newHarness(t, func(s execstore.Store) kind[execstore.OutboxEntry, entryKey] { return outboxKind{store: s} },
			Options{Lease: store, LeaseDuration: dur, OnPartition: func(ev PartitionEvent) {
				mu.Lock()
				defer mu.Unlock()
				events = append(events, ev)
			}})
		p := b.r.partOf("S")
		key := b.r.partitionKey(p)
		ls, err := b.r.lease.claimAs(context.Background(), key, leaseFingerprint)
		require.NoError(t, err)
		require.NotNil(t, ls)
		require.True(t, b.s.took(p, ls, time.Time{}))

		time.Sleep(dur + dur/24) // not renewed: lapsed at the lease server too
		other := leaser{store: store, holder: "other", dur: dur}
		ols, err := other.claimAs(context.Background(), key, leaseFingerprint)
		require.NoError(t, err)
		require.NotNil(t, ols, "the other relay takes the lapsed lease over")
		require.True(t, ols.takeOver)
		otherFrom := time.Now() // its claim's answer: it may hand the partition's items out

		time.Sleep(dur / 24) // the hand-over comes next, before the renewer's look
		b.s.mu.Lock()
		h := b.s.holds[p]
		require.NotNil(t, h)
		b.s.stopHanding(h, holdDraining, time.Now(), nil)
		b.s.mu.Unlock()
		b.s.releaseDrained()

		mu.Lock()
		defer mu.Unlock()
		require.Len(t, events, 2)
		taken, gaveUp := events[0], events[1]
		require.True(t, taken.Held)
		require.False(t, gaveUp.Held)
		assert.Equal(t, ls.liveUntil(), gaveUp.Local, "given up when the lease stopped being live")
		assert.True(t, gaveUp.Local.Before(otherFrom), "given up at %v, after the other relay took it at %v", gaveUp.Local, otherFrom)
	})
}
