package relay_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
)

// finishAs commits a new execution id in status st with c's other parts.
func finishAs(t *testing.T, s execstore.Store, id string, st execstore.Status, c execstore.Commit) *execstore.Execution {
	t.Helper()
	exe := &execstore.Execution{ID: id, DefinitionID: "def", Status: st, Data: []byte("{}")}
	_, err := s.Commit(bg, exe, c)
	require.NoError(t, err)
	return exe
}

// A relay with a Retention deletes the finished executions of its partitions once past their
// retention by its clock and once they hold nothing: the Done ones, the one whose entry it
// delivered first; not the Failed one (kept longer), the running one, or the one whose timer
// is still armed. The deletes are counted in Stats and in the store's totals. On memstore in
// virtual time.
func TestRetentionDeletesWhatIsPastIt(t *testing.T) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, _ func() execstore.Store) {
		retaining := store.(execstore.Retaining)
		var gone []string
		for i := range 5 {
			gone = append(gone, finishAs(t, store, fmt.Sprintf("done-%d", i), execstore.Done, execstore.Commit{}).ID)
		}
		gone = append(gone, finishAs(t, store, "done-emitting", execstore.Done,
			execstore.Commit{Emits: []execstore.Emit{{Event: []byte("last")}}}).ID)
		kept := []string{
			finishAs(t, store, "failed", execstore.Failed, execstore.Commit{}).ID,
			finishAs(t, store, "running", execstore.Running, execstore.Commit{}).ID,
			finishAs(t, store, "done-timer", execstore.Done, execstore.Commit{Timers: []execstore.TimerOp{
				execstore.ScheduleTimer("p", time.Now().Add(365*24*time.Hour))}}).ID,
		}
		before, err := retaining.RetentionTotals(bg)
		require.NoError(t, err)
		retention := execstore.DefaultRetention
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil }, relay.Options{
			PollInterval: 20 * time.Millisecond, RetentionInterval: 20 * time.Millisecond, Retention: &retention,
			Clock: func() time.Time { return time.Now().Add(8 * 24 * time.Hour) }})
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Retained == int64(len(gone)) }, "every Done execution deleted")
		require.NoError(t, stop())
		for _, id := range gone {
			got, err := store.Load(bg, id)
			require.NoError(t, err)
			assert.Nil(t, got, "%s is past its retention", id)
		}
		for _, id := range kept {
			got, err := store.Load(bg, id)
			require.NoError(t, err)
			assert.NotNil(t, got, "%s is kept", id)
		}
		after, err := retaining.RetentionTotals(bg)
		require.NoError(t, err)
		assert.Equal(t, before.Deleted[execstore.Done]+int64(len(gone)), after.Deleted[execstore.Done])
		assert.Zero(t, r.Stats().RetentionErrors)
	})
}

// Two relay processes sharing the partitions through their leases delete every expired
// execution once between them: their counts add up to the executions deleted. On memstore
// over memstore.Leases in virtual time; on aio, a store per process over one database.
func TestRetentionSharedByLeases(t *testing.T) {
	eachLeaseBackend(t, func(t *testing.T, store execstore.Store, another func() execstore.Store, open leasesOpener) {
		const n = 40
		for i := range n {
			finishAs(t, store, fmt.Sprintf("shared-%02d", i), execstore.Done, execstore.Commit{})
		}
		retention := execstore.Retention{Done: time.Hour}
		start := func(s execstore.Store) (*relay.Relay, func() error) {
			leases, _ := open()
			opts := leaseOptions(leases)
			opts.Retention, opts.RetentionInterval = &retention, 20*time.Millisecond
			opts.Clock = func() time.Time { return time.Now().Add(2 * time.Hour) }
			r := relay.New(s, func(context.Context, execstore.OutboxEntry) error { return nil }, opts)
			return r, run(t, r)
		}
		a, stopA := start(store)
		b, stopB := start(another())
		settleUntil(t, func() bool { return a.Stats().Retained+b.Stats().Retained == n }, "every execution deleted")
		// A few more passes, five RetentionIntervals: nothing more is counted. A window, not
		// a bound: on a slow machine fewer passes make the check weaker, never wrong.
		time.Sleep(100 * time.Millisecond)
		require.NoError(t, stopA())
		require.NoError(t, stopB())
		assert.EqualValues(t, n, a.Stats().Retained+b.Stats().Retained)
		totals, err := store.(execstore.Retaining).RetentionTotals(bg)
		require.NoError(t, err)
		assert.EqualValues(t, n, totals.Deleted[execstore.Done])
		page, err := store.List(bg, execstore.ListQuery{})
		require.NoError(t, err)
		assert.Empty(t, page.Items)
	})
}
