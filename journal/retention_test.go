package journal

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/execstore/execstore"
)

// The instants the retention tests set receipt times to: long before the cutoff, and the
// cutoff itself.
var (
	longAgo = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	cutoff  = time.Date(2021, 1, 1, 0, 0, 0, 0, time.UTC)
)

// receivedAt sets invocation id's receipt time, as Reconcile would have recorded it at at.
func receivedAt(t *testing.T, coll *mongo.Collection, id string, at time.Time) {
	t.Helper()
	rawSet(t, coll, id, bson.D{{Key: fReceiptAt, Value: at}})
}

// finishedUnknownThen takes invocation id to an attempt reconciled Unknown, then settled by
// o (Succeeded, Failed; "" leaves it Unknown).
func finishedUnknownThen(t *testing.T, j *Journal, id Identity, o Outcome) Fence {
	t.Helper()
	f := preparedFence(t, j, id)
	a, err := j.Dispatch(bg, f)
	require.NoError(t, err)
	f, err = j.Reconcile(bg, a.Fence, Receipt{Attempt: a.N, Outcome: Unknown})
	require.NoError(t, err)
	if o == "" {
		return f
	}
	f, err = j.Reconcile(bg, f, Receipt{Attempt: a.N, Outcome: o})
	require.NoError(t, err)
	return f
}

// exists reports whether invocation id is stored.
func exists(t *testing.T, j *Journal, id string) bool {
	t.Helper()
	_, err := j.Read(bg, id)
	if err != nil {
		require.ErrorIs(t, err, execstore.ErrNotFound)
		return false
	}
	return true
}

// The retention deletes the finished invocations whose finishing receipt is at or before the
// cutoff, and nothing else: not one claimed, checkpointed, prepared, dispatched without a
// receipt, Unknown, or Failed with another attempt allowed, even with a receipt time before
// the cutoff; not a finished one whose receipt came after it. It counts what it deleted.
func TestRetentionDeletesFinishedOnly(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	coll := rawCollection(t, j)

	finishedIDs := []string{"succeeded", "unknown-then-succeeded", "unknown-then-failed", "succeeded-at-cutoff"}
	lifeUntilReceipt(t, j, ident("succeeded"), Succeeded)
	finishedUnknownThen(t, j, ident("unknown-then-succeeded"), Succeeded)
	finishedUnknownThen(t, j, ident("unknown-then-failed"), Failed)
	lifeUntilReceipt(t, j, ident("succeeded-at-cutoff"), Succeeded)
	lifeUntilReceipt(t, j, ident("succeeded-after-cutoff"), Succeeded)

	f, err := j.Claim(bg, ident("claimed"), "worker-1")
	require.NoError(t, err)
	_, _, err = j.Checkpoint(bg, f, PhaseBefore, []byte("s"))
	require.NoError(t, err)
	preparedFence(t, j, ident("prepared"))
	_, err = j.Dispatch(bg, preparedFence(t, j, ident("dispatched")))
	require.NoError(t, err)
	finishedUnknownThen(t, j, ident("unknown"), "")
	lifeUntilReceipt(t, j, ident("failed"), Failed)
	redispatched := lifeUntilReceipt(t, j, ident("failed-then-dispatched"), Failed)
	_, err = j.Dispatch(bg, redispatched)
	require.NoError(t, err)
	unfinishedIDs := []string{"claimed", "prepared", "dispatched", "unknown", "failed", "failed-then-dispatched"}

	// Reconcile records the receipt time, Dispatch clears it.
	assert.NotNil(t, rawDoc(t, coll, "failed").ReceiptAt, "a receipt without its time")
	assert.Nil(t, rawDoc(t, coll, "failed-then-dispatched").ReceiptAt, "a pending attempt with a receipt time")

	for _, id := range append(append([]string{}, finishedIDs...), unfinishedIDs...) {
		receivedAt(t, coll, id, longAgo) // only the flags keep the unfinished ones
	}
	receivedAt(t, coll, "succeeded-at-cutoff", cutoff)
	receivedAt(t, coll, "succeeded-after-cutoff", cutoff.Add(time.Millisecond))

	inv, err := j.Read(bg, "unknown-then-failed")
	require.NoError(t, err)
	assert.True(t, inv.Finished())
	assert.Equal(t, longAgo, inv.FinishedAt)
	inv, err = j.Read(bg, "unknown")
	require.NoError(t, err)
	assert.False(t, inv.Finished())
	assert.True(t, inv.FinishedAt.IsZero())

	// Two batches of two, then nothing left to delete.
	n1, err := j.DeleteExpired(bg, cutoff, 2)
	require.NoError(t, err)
	n2, err := j.DeleteExpired(bg, cutoff, 2)
	require.NoError(t, err)
	n3, err := j.DeleteExpired(bg, cutoff, MaxRetentionBatch)
	require.NoError(t, err)
	assert.Equal(t, []int64{2, 2, 0}, []int64{n1, n2, n3})

	for _, id := range finishedIDs {
		assert.False(t, exists(t, j, id), "%s kept", id)
	}
	for _, id := range append(unfinishedIDs, "succeeded-after-cutoff") {
		assert.True(t, exists(t, j, id), "%s deleted", id)
	}

	totals, err := j.RetentionTotals(bg)
	require.NoError(t, err)
	assert.EqualValues(t, 4, totals.Deleted)
	assert.False(t, totals.LastAt.IsZero())
	assert.EqualValues(t, 4, j.Stats().RetentionDeleted)
	assert.EqualValues(t, 3, j.Stats().Ops["delete_expired"].Calls)

	// A second journal on the same collection adds to the same totals.
	j2 := openJournal(t, nil, j.opts)
	n, err := j2.DeleteExpired(bg, cutoff.Add(time.Millisecond), MaxRetentionBatch)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	totals, err = j.RetentionTotals(bg)
	require.NoError(t, err)
	assert.EqualValues(t, 5, totals.Deleted)

	// A deleted id is forgotten: claiming it claims it anew.
	f, err = j.Claim(bg, ident("succeeded"), "worker-2")
	require.NoError(t, err)
	assert.EqualValues(t, 1, f.Revision)
}

// The receipt time is the server's, written by Reconcile's own write: an invocation
// finished now is past a cutoff an hour ahead, and not past one an hour back.
func TestRetentionCountsFromTheServersReceiptTime(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	lifeUntilReceipt(t, j, ident("now"), Succeeded)
	n, err := j.DeleteExpired(bg, time.Now().Add(-time.Hour), 10)
	require.NoError(t, err)
	assert.Zero(t, n)
	n, err = j.DeleteExpired(bg, time.Now().Add(time.Hour), 10)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
}

// A write between the retention's read and its delete keeps the invocation: a checkpoint
// that moved its revision, flags changed outside the journal at the same revision, or the
// id deleted and claimed anew to the same revision. The untouched one of the same batch is
// deleted, and only it is counted.
func TestRetentionSparesWhatWasWrittenSinceTheRead(t *testing.T) {
	j := openJournal(t, nil, testOptions(t))
	coll := rawCollection(t, j)
	fences := map[string]Fence{}
	for _, id := range []string{"checkpointed", "altered", "claimed-anew", "untouched"} {
		fences[id] = lifeUntilReceipt(t, j, ident(id), Succeeded)
		receivedAt(t, coll, id, longAgo)
	}

	read, err := j.expiredBy(bg, cutoff, MaxRetentionBatch)
	require.NoError(t, err)
	require.Len(t, read, 4)

	// The owner writes its after-checkpoint: the revision moves.
	_, _, err = j.Checkpoint(bg, fences["checkpointed"], PhaseAfter, []byte("after"))
	require.NoError(t, err)
	// The flags are changed outside the journal, at the same revision.
	rawSet(t, coll, "altered", bsonD(fLatest, attemptPending))
	// The id is deleted and claimed anew, and taken to the same revision.
	_, err = coll.DeleteOne(bg, bson.D{{Key: fID, Value: "claimed-anew"}})
	require.NoError(t, err)
	again := lifeUntilReceipt(t, j, ident("claimed-anew"), Succeeded)
	require.Equal(t, fences["claimed-anew"].Revision, again.Revision)
	receivedAt(t, coll, "claimed-anew", longAgo)

	n, err := j.deleteExpired(bg, read, cutoff)
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	for _, id := range []string{"checkpointed", "altered", "claimed-anew"} {
		_, err := coll.FindOne(bg, bson.D{{Key: fID, Value: id}}).Raw()
		assert.NoError(t, err, "%s deleted although written since the read", id)
	}
	assert.False(t, exists(t, j, "untouched"))
	totals, err := j.RetentionTotals(bg)
	require.NoError(t, err)
	assert.EqualValues(t, 1, totals.Deleted)

	// The checkpointed one is still finished past the cutoff: the next run deletes it, and
	// its owner's fence then finds nothing.
	n, err = j.DeleteExpired(bg, cutoff, MaxRetentionBatch)
	require.NoError(t, err)
	assert.EqualValues(t, 2, n, "the checkpointed and the one claimed anew")
	_, _, err = j.Checkpoint(bg, fences["untouched"], PhaseAfter, []byte("late"))
	require.ErrorIs(t, err, execstore.ErrNotFound)
}

// Options.Retention runs the retention in a goroutine of the Journal's: it deletes what is
// past the retention, batch after batch, counts it in Stats and the OpenTelemetry counter
// execstore.retention.deleted, and Close stops it, leaving no goroutine behind.
func TestRetentionRunsPeriodicallyAndStops(t *testing.T) {
	opts := testOptions(t)
	setup := openJournal(t, nil, opts)
	coll := rawCollection(t, setup)
	for _, id := range []string{"a", "b", "c"} {
		lifeUntilReceipt(t, setup, ident(id), Succeeded)
		receivedAt(t, coll, id, longAgo)
	}
	lifeUntilReceipt(t, setup, ident("recent"), Succeeded)
	lifeUntilReceipt(t, setup, ident("failed"), Failed)
	receivedAt(t, coll, "failed", longAgo)

	before := goleak.IgnoreCurrent()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer func() { _ = mp.Shutdown(bg) }()
	var mu sync.Mutex
	var deleted int64
	done := make(chan struct{})
	var once sync.Once
	opts.Retention, opts.RetentionInterval, opts.RetentionBatch = 24*time.Hour, 10*time.Millisecond, 2
	opts.MeterProvider = mp
	opts.retained = func(n int64, err error) {
		mu.Lock()
		defer mu.Unlock()
		assert.NoError(t, err)
		if deleted += n; deleted >= 3 {
			once.Do(func() { close(done) })
		}
	}
	j, err := Open(bg, srv.URI, testRing, opts)
	require.NoError(t, err)
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the retention did not delete the three invocations past it")
	}
	require.NoError(t, j.Close(bg))
	goleak.VerifyNone(t, before)

	for _, id := range []string{"a", "b", "c"} {
		assert.False(t, exists(t, setup, id), "%s kept", id)
	}
	assert.True(t, exists(t, setup, "recent"))
	assert.True(t, exists(t, setup, "failed"))
	st := j.Stats()
	assert.EqualValues(t, 3, st.RetentionDeleted)
	assert.GreaterOrEqual(t, st.Ops["delete_expired"].Calls, int64(2), "a batch of 2, then the rest")
	totals, err := setup.RetentionTotals(bg)
	require.NoError(t, err)
	assert.EqualValues(t, 3, totals.Deleted)

	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(bg, &rm))
	var counted int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name != "execstore.retention.deleted" {
				continue
			}
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				store, _ := dp.Attributes.Value(attribute.Key("execstore.store"))
				assert.Equal(t, "journal", store.AsString())
				counted += dp.Value
			}
		}
	}
	assert.EqualValues(t, 3, counted)
}

// Bad input is execstore.ErrInvalid before any I/O, and an uncertain journal refuses to
// delete, as it refuses every mutation.
func TestRetentionRefusesBadInputBeforeIO(t *testing.T) {
	var commands atomic.Int64
	opts := testOptions(t)
	opts.ClientOptions = options.Client().SetMonitor(&event.CommandMonitor{
		Started: func(context.Context, *event.CommandStartedEvent) { commands.Add(1) }})
	j := openJournal(t, nil, opts)
	before := commands.Load()
	for name, call := range map[string]func() (int64, error){
		"zero cutoff":   func() (int64, error) { return j.DeleteExpired(bg, time.Time{}, 10) },
		"zero limit":    func() (int64, error) { return j.DeleteExpired(bg, cutoff, 0) },
		"negative":      func() (int64, error) { return j.DeleteExpired(bg, cutoff, -1) },
		"above the max": func() (int64, error) { return j.DeleteExpired(bg, cutoff, MaxRetentionBatch+1) },
	} {
		n, err := call()
		require.ErrorIs(t, err, execstore.ErrInvalid, name)
		assert.Zero(t, n, name)
	}
	j.uncertain.add("some-invocation")
	_, err := j.DeleteExpired(bg, cutoff, 10)
	require.ErrorIs(t, err, ErrUncertain)
	assert.Equal(t, before, commands.Load(), "a command was sent")
}
