package relay_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// partitionedOnly is a store with partitioned scans that cannot leave executions out: it
// hides memstore's execstore.Excluding.
type partitionedOnly struct{ execstore.Partitioned }

// A relay's polls leave out the sources whose items it holds in flight (execstore.Excluding),
// for two PollIntervals in a row at most: while one lane's handler holds the delivery back
// for ten polls, every third returns the entries queued or in the handler (Stats.Skipped),
// and the backlog still counts them. The same relay on a store that cannot leave sources
// out reads them again at each poll.
func TestPollsLeaveOutWhatIsInFlight(t *testing.T) {
	for _, excluding := range []bool{true, false} {
		t.Run(fmt.Sprint("excluding=", excluding), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := memstore.New(memstore.Options{Partitions: 4})
				t.Cleanup(func() { _ = mem.Close(bg) })
				var store execstore.Partitioned = mem
				if !excluding {
					store = partitionedOnly{mem}
				}
				_, isExcluding := store.(execstore.Excluding)
				require.Equal(t, excluding, isExcluding)
				em := newEmitter(t, mem)
				const sources, each = 3, 4
				for i := range sources * each {
					em.emit(fmt.Sprint("s", i%sources), fmt.Sprint("t", i), fmt.Sprint(i))
				}
				gate := make(chan struct{})
				handled := 0
				r := relay.New(store, func(ctx context.Context, _ execstore.OutboxEntry) error {
					select {
					case <-gate:
					case <-ctx.Done():
						return ctx.Err()
					}
					handled++ // one lane: one call at a time
					return nil
				}, relay.Options{Lanes: 1, PollInterval: 100 * time.Millisecond})
				stop := run(t, r)
				time.Sleep(time.Second + 50*time.Millisecond) // ten polls, every entry in flight
				synctest.Wait()
				skipped := r.Stats().Skipped
				backlog := 0
				for _, b := range r.Backlog() {
					backlog += b.Items
				}
				assert.Equal(t, sources*each, backlog, "the backlog counts the entries in flight")
				close(gate)
				settleUntil(t, func() bool { return r.Stats().Acked == sources*each && pending(t, mem) == 0 }, "every entry acked")
				require.NoError(t, stop())
				assert.Equal(t, sources*each, handled)
				if excluding {
					assert.Equal(t, int64(3*sources*each), skipped, "every third poll returned the entries in flight")
				} else {
					assert.Equal(t, int64(10*sources*each), skipped, "every poll returned the entries in flight")
				}
			})
		})
	}
}

// A scan cut at the cap leaves an execution's later entries in the store, behind those now
// in flight: the scan that follows reads them, leaving nothing out, and they are delivered
// with no poll.
func TestScanAfterACutLeavesNothingOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(memstore.Options{Partitions: 4})
		t.Cleanup(func() { _ = mem.Close(bg) })
		em := newEmitter(t, mem)
		const n = 12
		for i := range n {
			em.emit("s", "t", fmt.Sprint(i))
		}
		var got []string
		r := relay.New(mem, func(_ context.Context, e execstore.OutboxEntry) error {
			got = append(got, string(e.Event)) // one lane: one call at a time
			return nil
		}, relay.Options{Lanes: 1, Batch: 2, PollInterval: time.Hour})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Acked == n }, "every entry acked with no poll")
		require.NoError(t, stop())
		want := make([]string, n)
		for i := range want {
			want[i] = fmt.Sprint(i)
		}
		assert.Equal(t, want, got, "in commit order, each once")
	})
}

// foreign is a store whose commits no relay of this process hears of (the relay is not
// subscribed to it): a commit through the store it wraps is as another process's whose
// mark was lost.
type foreign struct{ *memstore.Store }

// A source left out of the polls, its first entry in a handler that never returns, is read
// again once it was left out for two PollIntervals: its next entry, committed by another
// process whose mark was lost, goes to another target and is delivered within three.
func TestLeftOutSourceReadWithinThreePolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New(memstore.Options{Partitions: 4})
		t.Cleanup(func() { _ = mem.Close(bg) })
		em := newEmitter(t, mem)
		em.emit("s", "t1", "stuck")
		started := make(chan string, 2)
		release := make(chan struct{})
		const poll = 100 * time.Millisecond
		r := relay.New(foreign{mem}, func(ctx context.Context, e execstore.OutboxEntry) error {
			started <- string(e.Event)
			if string(e.Event) == "stuck" {
				select {
				case <-release:
				case <-ctx.Done():
				}
			}
			return nil
		}, relay.Options{Lanes: 2, PollInterval: poll})
		stop := run(t, r)
		require.Equal(t, "stuck", <-started)
		committed := time.Now()
		em.emit("s", "t2", "next")
		select {
		case ev := <-started:
			require.Equal(t, "next", ev)
		case <-time.After(time.Minute):
			require.FailNow(t, "the source's next entry was never delivered")
		}
		assert.LessOrEqual(t, time.Since(committed), 3*poll, "delivered within three polls")
		assert.Greater(t, time.Since(committed), 2*poll, "the polls left the source out for two PollIntervals")
		close(release)
		settleUntil(t, func() bool { return r.Stats().Acked == 2 }, "both acked")
		require.NoError(t, stop())
	})
}
