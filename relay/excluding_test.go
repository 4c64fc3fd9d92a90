package relay_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// partitionedMem returns a memstore of 4 partitions, closed when t ends, and an emitter of
// entries into it.
func partitionedMem(t *testing.T) (*memstore.Store, *emitter) {
	mem := memstore.New(memstore.Options{Partitions: 4})
	t.Cleanup(func() { _ = mem.Close(bg) })
	return mem, newEmitter(t, mem)
}

// partitionedOnly is a store with partitioned scans that cannot leave executions out: it
// hides memstore's execstore.Excluding.
type partitionedOnly struct{ execstore.Partitioned }

// A relay's polls leave out the sources whose items it holds in flight (execstore.Excluding),
// for two PollIntervals in a row at most while a lane is idle, and for as long as every lane
// is busy. While the handlers hold the delivery back for ten polls: with one lane, busy, no
// poll returns the entries queued or in the handler (Stats.Skipped); with two lanes and
// every entry for one target, so that one lane idles, every third poll does; on a store that
// cannot leave sources out, every poll does. The backlog counts them all the while.
func TestPollsLeaveOutWhatIsInFlight(t *testing.T) {
	const sources, each = 3, 4
	for _, tc := range []struct {
		name       string
		excluding  bool
		lanes      int
		oneTarget  bool
		wantPolls  int64 // the polls that return every entry in flight
		wantReason string
	}{
		{"every lane busy", true, 1, false, 0, "no poll returned the entries in flight: every lane was busy"},
		{"a lane idle", true, 2, true, 3, "every third poll returned the entries in flight: a lane was idle"},
		{"not excluding", false, 1, false, 10, "every poll returned the entries in flight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem, em := partitionedMem(t)
				var store execstore.Partitioned = mem
				if !tc.excluding {
					store = partitionedOnly{mem}
				}
				_, isExcluding := store.(execstore.Excluding)
				require.Equal(t, tc.excluding, isExcluding)
				for i := range sources * each {
					target := fmt.Sprint("t", i)
					if tc.oneTarget {
						target = "t"
					}
					em.emit(fmt.Sprint("s", i%sources), target, fmt.Sprint(i))
				}
				gate := make(chan struct{})
				var handled atomic.Int64
				r := relay.New(store, func(ctx context.Context, _ execstore.OutboxEntry) error {
					select {
					case <-gate:
					case <-ctx.Done():
						return ctx.Err()
					}
					handled.Add(1)
					return nil
				}, relay.Options{Lanes: tc.lanes, PollInterval: 100 * time.Millisecond})
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
				assert.Equal(t, int64(sources*each), handled.Load())
				assert.Equal(t, tc.wantPolls*sources*each, skipped, tc.wantReason)
			})
		})
	}
}

// A scan cut at the cap leaves an execution's later entries in the store, behind those now
// in flight: the scan that follows reads them, leaving nothing out, and they are delivered
// with no poll.
func TestScanAfterACutLeavesNothingOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, em := partitionedMem(t)
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

// stuckSource commits entry "stuck" of source s to t1, and runs a relay with lanes Lanes
// polling every poll, on a store whose commits it does not hear of (foreign). Its handler
// sends each event it starts on started, and holds "stuck" until release is closed. It
// returns once "stuck" is in the handler. Call it in a synctest bubble.
func stuckSource(t *testing.T, lanes int, poll time.Duration) (r *relay.Relay, em *emitter, started chan string, release chan struct{}, stop func() error) {
	mem, em := partitionedMem(t)
	em.emit("s", "t1", "stuck")
	started, release = make(chan string, 2), make(chan struct{})
	r = relay.New(foreign{mem}, func(ctx context.Context, e execstore.OutboxEntry) error {
		started <- string(e.Event)
		if string(e.Event) == "stuck" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}, relay.Options{Lanes: lanes, PollInterval: poll})
	stop = run(t, r)
	require.Equal(t, "stuck", <-started)
	return r, em, started, release, stop
}

// A source left out of the polls, its first entry in a handler that never returns, is read
// again once it was left out for two PollIntervals: its next entry, committed by another
// process whose mark was lost, goes to another target and is delivered within three.
func TestLeftOutSourceReadWithinThreePolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = 100 * time.Millisecond
		r, em, started, release, stop := stuckSource(t, 2, poll)
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

// With every lane busy, a source left out of the polls stays out past two PollIntervals: its
// next entry, committed by another process whose mark was lost, could only wait in the one
// lane's queue. Once the lane is free, the next poll reads it.
func TestLeftOutWhileEveryLaneIsBusy(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const poll = 100 * time.Millisecond
		r, em, started, release, stop := stuckSource(t, 1, poll)
		em.emit("s", "t2", "next")
		time.Sleep(10 * poll)
		synctest.Wait()
		assert.Zero(t, r.Stats().Skipped, "no poll read the source while the lane was busy")
		released := time.Now()
		close(release)
		select {
		case ev := <-started:
			require.Equal(t, "next", ev)
		case <-time.After(time.Minute):
			require.FailNow(t, "the source's next entry was never delivered")
		}
		assert.LessOrEqual(t, time.Since(released), poll, "read by the first poll once the lane was free")
		settleUntil(t, func() bool { return r.Stats().Acked == 2 }, "both acked")
		require.NoError(t, stop())
	})
}

// slowAcks is a store whose acks wait for gate.
type slowAcks struct {
	*memstore.Store
	gate chan struct{}
}

func (s slowAcks) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	select {
	case <-s.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	return s.Store.AckOutbox(ctx, sourceID, seq)
}

// Entries that waited in a busy lane's queue past two PollIntervals, then left their
// handler while their acks wait, keep their sources out of the polls, though the lane is
// idle: while their acks have been written for less than ten PollIntervals, even the one
// whose handler held it through the backlog. Acks that stall past that no longer do.
func TestLeftOutFromTheHandlersCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem, em := partitionedMem(t)
		const n = 6
		for i := range n {
			em.emit(fmt.Sprint("s", i), fmt.Sprint("t", i), fmt.Sprint(i))
		}
		const poll = 100 * time.Millisecond
		handlers, acks := make(chan struct{}), make(chan struct{})
		r := relay.New(slowAcks{mem, acks}, func(ctx context.Context, _ execstore.OutboxEntry) error {
			select {
			case <-handlers:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		}, relay.Options{Lanes: 1, PollInterval: poll})
		stop := run(t, r)
		time.Sleep(10*poll + poll/2) // ten polls: one entry in the handler, the rest queued
		synctest.Wait()
		assert.Zero(t, r.Stats().Skipped, "no poll read the backlog while the lane was busy")
		close(handlers)
		synctest.Wait() // every handler returned; every ack waits
		require.Equal(t, int64(n), r.Stats().Succeeded)
		time.Sleep(8 * poll)
		synctest.Wait()
		assert.Zero(t, r.Stats().Skipped,
			"no poll read the entries whose acks were written for less than ten polls, the one a handler held for ten polls included")
		time.Sleep(5 * poll)
		synctest.Wait()
		assert.NotZero(t, r.Stats().Skipped, "acks stalled past ten polls no longer keep their sources out")
		close(acks)
		settleUntil(t, func() bool { return r.Stats().Acked == n && pending(t, mem) == 0 }, "every entry acked")
		require.NoError(t, stop())
	})
}
