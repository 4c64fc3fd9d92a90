package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
)

// A relay's backlog is what its last scan of each partition found pending: the entries
// counted per partition, the oldest one's commit time, the relay as their holder; its gauges
// report the same, and the partitions empty once everything is delivered. It sends nothing
// of its own: the store sees the relay's scans and acks only.
func TestRelayBacklogIsItsLastScan(t *testing.T) {
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
	eventually(t, func() bool { return len(r.Backlog()) == store.Partitions() }, "every partition scanned")
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
	eventually(t, func() bool {
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
}

// A sweeper's backlog counts the timers due at its scan, not those it read ahead, and its
// age is how late the most overdue one is.
func TestSweeperBacklogCountsDueTimers(t *testing.T) {
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
	eventually(t, func() bool { return len(sw.Backlog()) > 0 }, "scanned")
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
