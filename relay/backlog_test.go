package relay_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// A relay's backlog is what its last scan of each partition found pending: the entries
// counted per partition, the oldest one's commit time, the relay as their holder; its gauges
// report the same, and the partitions empty once everything is delivered. In virtual time.
func TestRelayBacklogIsItsLastScan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		store := newMemstore(t)
		em := newEmitter(t, store)
		for _, src := range []string{"b1", "b2", "b3", "b4", "b5"} {
			em.emit(src, "t", "x")
			time.Sleep(2 * time.Millisecond)
			em.emit(src, "t", "y")
		}
		pending, err := store.PendingOutbox(bg, 0)
		require.NoError(t, err)
		want := map[int]relay.Backlog{}
		for _, e := range pending {
			p := execstore.PartitionOf(e.SourceID, store.Partitions())
			b := want[p]
			b.Partition, b.Items = p, b.Items+1
			if b.Oldest.IsZero() || e.CommittedAt.Before(b.Oldest) {
				b.Oldest = e.CommittedAt
			}
			want[p] = b
		}

		release := make(chan struct{})
		r := relay.New(store, func(ctx context.Context, _ execstore.OutboxEntry) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, relay.Options{PollInterval: 50 * time.Millisecond, MeterProvider: mp})
		stop := run(t, r)
		settleUntil(t, func() bool { return len(r.Backlog()) == store.Partitions() }, "every partition scanned")
		got := map[int]relay.Backlog{}
		for _, b := range r.Backlog() {
			assert.Equal(t, r.Member(), b.Holder)
			assert.False(t, b.AtLeast)
			got[b.Partition] = b
		}
		for p, w := range want {
			assert.Equal(t, w.Items, got[p].Items, "partition %d", p)
			assert.True(t, w.Oldest.Equal(got[p].Oldest), "partition %d: oldest %s, want %s", p, got[p].Oldest, w.Oldest)
			assert.Greater(t, got[p].Age(time.Now()), time.Duration(0))
		}
		for p, b := range got {
			if _, ok := want[p]; !ok {
				assert.Zero(t, b.Items, "partition %d has nothing pending", p)
			}
		}

		items, ages := backlogGauges(t, reader)
		for p, w := range want {
			assert.Equal(t, int64(w.Items), items[p], "gauge of partition %d", p)
			assert.Greater(t, ages[p], 0.0, "age of partition %d", p)
		}
		assert.Len(t, items, store.Partitions(), "one point per partition held")

		close(release)
		settleUntil(t, func() bool {
			for _, b := range r.Backlog() {
				if b.Items > 0 {
					return false
				}
			}
			return true
		}, "a scan after the deliveries finds nothing pending")
		_, ages = backlogGauges(t, reader)
		for p := range want {
			assert.Zero(t, ages[p], "partition %d", p)
		}
		require.NoError(t, stop())
		assert.Empty(t, r.Backlog(), "a stopped relay holds nothing")
	})
}

// A sweeper's backlog counts the timers due at its scan, not those it read ahead, and its
// age is how late the most overdue one is. In virtual time.
func TestSweeperBacklogCountsDueTimers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		em := newEmitter(t, store)
		now := time.Now()
		em.schedule("late", "p", now.Add(-time.Hour))
		em.schedule("soon", "p", now.Add(80*time.Millisecond)) // within the scan's look-ahead
		release := make(chan struct{})
		sw := relay.NewSweeper(store, func(ctx context.Context, _ execstore.DueTimer) error {
			select {
			case <-release:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, relay.Options{PollInterval: time.Hour})
		stop := run(t, sw)
		defer func() { close(release); require.NoError(t, stop()) }()
		settleUntil(t, func() bool {
			bl := sw.Backlog()
			for _, b := range bl {
				if b.ScannedAt.IsZero() {
					return false
				}
			}
			return len(bl) == store.Partitions()
		}, "every partition scanned")
		late := execstore.PartitionOf("late", store.Partitions())
		soon := execstore.PartitionOf("soon", store.Partitions())
		for _, b := range sw.Backlog() {
			switch b.Partition {
			case late:
				assert.Equal(t, 1, b.Items)
				assert.Greater(t, b.Age(time.Now()), 59*time.Minute)
			case soon:
				assert.Zero(t, b.Items, "not due at the scan")
			default:
				assert.Zero(t, b.Items)
			}
		}
	})
}

// backlogGauges collects the backlog gauges, by partition.
func backlogGauges(t *testing.T, reader *sdkmetric.ManualReader) (items map[int]int64, ages map[int]float64) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	items, ages = map[int]int64{}, map[int]float64{}
	partition := func(set attribute.Set) int {
		v, ok := set.Value("execstore.partition")
		require.True(t, ok)
		return int(v.AsInt64())
	}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			switch m.Name {
			case "execstore.backlog.items":
				for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
					items[partition(dp.Attributes)] = dp.Value
				}
			case "execstore.backlog.age":
				for _, dp := range m.Data.(metricdata.Gauge[float64]).DataPoints {
					ages[partition(dp.Attributes)] = dp.Value
				}
			}
		}
	}
	return items, ages
}

// A relay's dead count per partition is the store's, counted by one command when it takes
// its partitions: its Backlog and its gauge execstore.backlog.dead agree with the dead items
// listed one by one. An item it moves to dead itself is added at once, with no count sent.
func TestRelayDeadCountIsTheStoresCount(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		dl := store.(execstore.DeadCounting)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		em := newEmitter(t, store)
		want := killSome(t, em, dl, 12)

		r := relay.New(store, func(_ context.Context, e execstore.OutboxEntry) error {
			if string(e.Event) == "poison" {
				return relay.ErrPermanent
			}
			return nil
		}, relay.Options{PollInterval: 20 * time.Millisecond, DeadCountInterval: time.Hour, MeterProvider: mp})
		run(t, r)
		counted := func() bool {
			bl := r.Backlog()
			for _, b := range bl {
				if b.DeadCountedAt.IsZero() {
					return false
				}
			}
			return len(bl) == dl.Partitions()
		}
		settleUntil(t, counted, "every partition counted")
		assertDeadCount(t, r.Backlog(), deadGauge(t, reader), want)
		assert.EqualValues(t, 1, r.Stats().DeadCounts, "one count for every partition")

		em.emit("dead-gauge-3", "t", "poison")
		settleUntil(t, func() bool { return r.Stats().Dead == 1 }, "the poison moved to dead")
		want = deadByPartition(t, dl)
		assertDeadCount(t, r.Backlog(), deadGauge(t, reader), want)
		assert.EqualValues(t, 1, r.Stats().DeadCounts, "no count sent for it")
		assert.Zero(t, r.Stats().DeadCountErrors)
	})
}

// Relays sharing the partitions each count the dead items of those they hold, one taken
// from another counted within a PollInterval: together their gauges give every partition's
// count once, as listed one by one.
func TestRelaysSharingPartitionsCountTheirOwnDead(t *testing.T) {
	eachLeaseBackend(t, func(t *testing.T, store execstore.Store, another func() execstore.Store, open leasesOpener) {
		dl := store.(execstore.DeadCounting)
		want := killSome(t, newEmitter(t, store), dl, 16)
		type member struct {
			r      *relay.Relay
			reader *sdkmetric.ManualReader
		}
		start := func(s execstore.Store) member {
			leases, _ := open()
			reader := sdkmetric.NewManualReader()
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
			t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			opts := leaseOptions(leases)
			opts.MeterProvider = mp
			// Leases that hold on a busy machine: the test waits for a moment when every
			// partition is held, and counted, by one of them.
			opts.LeaseDuration = 5 * time.Second
			r := relay.New(s, func(context.Context, execstore.OutboxEntry) error { return nil }, opts)
			run(t, r)
			return member{r, reader}
		}
		countedAll := func(ms ...member) func() bool {
			return func() bool {
				held := 0
				for _, m := range ms {
					st := m.r.Stats()
					if st.Partitions == 0 || st.Partitions == dl.Partitions() && len(ms) > 1 {
						return false
					}
					bl := m.r.Backlog()
					for _, b := range bl {
						if b.DeadCountedAt.IsZero() {
							return false
						}
					}
					if len(bl) != st.Partitions {
						return false
					}
					held += len(bl)
				}
				return held == dl.Partitions()
			}
		}
		a := start(store)
		settleUntil(t, countedAll(a), "a holds and counted every partition")
		assertDeadCount(t, a.r.Backlog(), deadGauge(t, a.reader), want)

		b := start(another())
		settleUntil(t, countedAll(a, b), "a and b share the partitions, each counted by its holder: a %+v %+v, b %+v %+v",
			lazy(func() any { return a.r.Stats() }), lazy(func() any { return a.r.Backlog() }),
			lazy(func() any { return b.r.Stats() }), lazy(func() any { return b.r.Backlog() }))
		together := map[int]int64{}
		for _, m := range []member{a, b} {
			gauge := deadGauge(t, m.reader)
			assertDeadCount(t, m.r.Backlog(), gauge, want)
			for p, n := range gauge {
				_, twice := together[p]
				assert.False(t, twice, "partition %d reported by both", p)
				together[p] = n
			}
			assert.Positive(t, m.r.Stats().DeadCounts)
		}
		assert.Len(t, together, dl.Partitions())
	})
}

// killSome commits two entries from each of n sources and moves the first of each to dead;
// it returns the store's dead items by partition, in several partitions.
func killSome(t *testing.T, em *emitter, dl execstore.DeadCounting, n int) map[int]int64 {
	t.Helper()
	for i := range n {
		src := fmt.Sprintf("dead-gauge-%d", i)
		seq := em.emit(src, "t", "dies")
		_, ok, err := dl.Fail(bg, execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: src, Seq: seq},
			execstore.Failure{Error: "no", At: time.Now(), Dead: true})
		require.NoError(t, err)
		require.True(t, ok)
		em.emit(src, "t", "lives")
	}
	want := deadByPartition(t, dl)
	require.Greater(t, len(want), 1, "dead items in several partitions")
	return want
}

// A negative DeadCountInterval counts nothing: no command, no gauge point, no Dead.
// In virtual time.
func TestDeadCountOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil },
			relay.Options{PollInterval: 10 * time.Millisecond, DeadCountInterval: -1, MeterProvider: mp})
		run(t, r)
		settleUntil(t, func() bool { return r.Stats().Scans >= 3 }, "scanned a few times")
		for _, b := range r.Backlog() {
			assert.True(t, b.DeadCountedAt.IsZero())
		}
		assert.Zero(t, r.Stats().DeadCounts)
		assert.Empty(t, deadGauge(t, reader))
	})
}

// deadByPartition lists the dead items of store, counted by partition.
func deadByPartition(t *testing.T, store execstore.DeadCounting) map[int]int64 {
	t.Helper()
	out := map[int]int64{}
	for cursor := ""; ; {
		page, err := store.ListDead(bg, execstore.DeadQuery{Cursor: cursor})
		require.NoError(t, err)
		for _, d := range page.Items {
			out[execstore.PartitionOf(d.ExecutionID, store.Partitions())]++
		}
		if cursor = page.NextCursor; cursor == "" {
			return out
		}
	}
}

// assertDeadCount asserts that the backlog and the gauge give want's dead items for each
// partition (none where want has none).
func assertDeadCount(t *testing.T, backlog []relay.Backlog, gauge, want map[int]int64) {
	t.Helper()
	require.NotEmpty(t, backlog)
	for _, b := range backlog {
		assert.Equal(t, want[b.Partition], b.Dead, "partition %d", b.Partition)
		assert.Equal(t, want[b.Partition], gauge[b.Partition], "gauge of partition %d", b.Partition)
	}
	assert.Len(t, gauge, len(backlog), "one point per partition held")
}

// deadGauge collects the gauge execstore.backlog.dead, by partition.
func deadGauge(t *testing.T, reader *sdkmetric.ManualReader) map[int]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[int]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "execstore.backlog.dead" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Gauge[int64]).DataPoints {
				v, ok := dp.Attributes.Value("execstore.partition")
				require.True(t, ok)
				out[int(v.AsInt64())] = dp.Value
			}
		}
	}
	return out
}

// lazy formats as f's result at the time it is formatted.
type lazy func() any

func (l lazy) String() string { return fmt.Sprintf("%+v", l()) }

// failingCount is a memstore whose dead counts fail.
type failingCount struct{ *memstore.Store }

var errCountRefused = errors.New("count refused")

func (failingCount) CountDeadIn(context.Context, []int) (map[int]int64, error) {
	return nil, errCountRefused
}

// A dead count that fails is an *Error of OpCountDead given to OnError and counted in
// DeadCountErrors; the partitions stay uncounted (no gauge point), and the count is sent
// again at the next poll. In virtual time.
func TestFailedDeadCountIsReported(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := failingCount{newMemstore(t)}
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		errs := make(chan error, 100)
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil },
			relay.Options{PollInterval: 10 * time.Millisecond, MeterProvider: mp, OnError: func(err error) {
				select {
				case errs <- err:
				default:
				}
			}})
		run(t, r)
		settleUntil(t, func() bool { return r.Stats().DeadCountErrors >= 2 }, "the count sent again after it failed")
		err := <-errs
		var re *relay.Error
		require.ErrorAs(t, err, &re)
		assert.Equal(t, relay.OpCountDead, re.Op)
		assert.ErrorIs(t, err, errCountRefused)
		for _, b := range r.Backlog() {
			assert.True(t, b.DeadCountedAt.IsZero(), "partition %d", b.Partition)
		}
		assert.Empty(t, deadGauge(t, reader))
	})
}
