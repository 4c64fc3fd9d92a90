package relay

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/memstore"
)

// errUnreachable is the failure of a soleLeases that cannot reach its lease server.
var errUnreachable = errors.New("lease server unreachable")

// soleLeases is one process's view of a memstore.Leases: its renewals, or all its calls, can
// be made to fail, as when the lease server cannot be reached.
type soleLeases struct {
	*memstore.Leases
	failRenew atomic.Bool // RenewAll fails
	dead      atomic.Bool // every call fails
}

func (l *soleLeases) ClaimAs(ctx context.Context, key, fp string, v int, d time.Duration, holder string) (idem.Claim, error) {
	if l.dead.Load() {
		return idem.Claim{}, errUnreachable
	}
	return l.Leases.ClaimAs(ctx, key, fp, v, d, holder)
}

func (l *soleLeases) RenewAll(ctx context.Context, claims []idem.Held, d time.Duration) ([]bool, error) {
	if l.dead.Load() || l.failRenew.Load() {
		return nil, errUnreachable
	}
	return l.Leases.RenewAll(ctx, claims, d)
}

func (l *soleLeases) Release(ctx context.Context, key, token string) (bool, error) {
	if l.dead.Load() {
		return false, errUnreachable
	}
	return l.Leases.Release(ctx, key, token)
}

// noOffer stands for a store that offers a lease store, which a soleRelay opened already.
type noOffer struct{}

func (noOffer) LeaseStore(context.Context) (*idem.Store, error) { return nil, errUnreachable }

// soleRelay is a relay without a lease over store, given leases as the lease store its store
// offers, and running until t ends.
func soleRelay(t *testing.T, store execstore.Store, leases Leases, dur time.Duration,
	handler func(context.Context, execstore.OutboxEntry) error, onError func(error)) *Relay {
	rl := New(store, handler, Options{LeaseDuration: dur, OnError: onError, PollInterval: dur / 8})
	rl.r.offer, rl.r.lease.store = noOffer{}, leases // as over a store that offers leases, opened already
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = rl.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return rl
}

// commitEntry commits one entry from source.
func commitEntry(t *testing.T, store execstore.Store, source string) {
	t.Helper()
	exe := &execstore.Execution{ID: source, DefinitionID: "sole", Status: execstore.Running}
	_, err := store.Commit(context.Background(), exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: "T", Event: []byte("e")}}})
	require.NoError(t, err)
}

// A relay whose sole lease is no longer renewed stops handing items out when less than
// LeaseDuration/6 of it is left, cancels its handlers once it ran out (errLeaseLost), then claims it
// again once it is released, and delivers what its cancelled handler left pending. In
// virtual time.
func TestSoleLeaseLost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dur = 6 * time.Second
		store := memstore.New(memstore.Options{})
		defer func() { _ = store.Close(context.Background()) }()
		leases := &soleLeases{Leases: memstore.NewLeases(memstore.LeasesOptions{})}
		var calls atomic.Int32
		cancelled := make(chan time.Time, 1)
		start := time.Now()
		rl := soleRelay(t, store, leases, dur, func(ctx context.Context, e execstore.OutboxEntry) error {
			if calls.Add(1) > 1 {
				return nil
			}
			<-ctx.Done()
			assert.ErrorIs(t, context.Cause(ctx), errLeaseLost)
			cancelled <- time.Now()
			return ctx.Err()
		}, nil)
		synctest.Wait()
		require.True(t, rl.Stats().Holding, "the relay holds the sole lease at once")
		leases.failRenew.Store(true) // from now on its lease is not renewed
		commitEntry(t, store, "S")

		var at time.Time
		select {
		case at = <-cancelled:
		case <-time.After(2 * dur):
			require.FailNow(t, "the handler was not cancelled within 2×LeaseDuration of its lease's last renewal")
		}
		assert.Equal(t, dur, at.Sub(start), "the handler is cancelled once the lease is no longer known to hold")
		leases.failRenew.Store(false)
		settleUntil(t, func() bool { return rl.Stats().Acked == 1 }, "the entry is delivered again, after the lease is claimed again")
		st := rl.Stats()
		assert.EqualValues(t, 1, st.LeasesLost)
		assert.EqualValues(t, 2, st.Leases, "claimed at the start and again after it was lost")
		assert.EqualValues(t, 2, calls.Load())
	})
}

// Of two relays without a lease, the one standing by takes over when the holder can no longer
// reach the lease server (a process cut off or dead): the holder stops handing items out
// when less than LeaseDuration/6 of its lease is left, its handlers are cancelled once the
// lease ran out (at its next look at its leases, every LeaseDuration/12), and the stand-by
// claims it within LeaseDuration×5/4 of the holder's last renewal. In virtual time.
func TestSoleStandByTakesOverFromTheDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const dur = 4 * time.Second
		store := memstore.New(memstore.Options{})
		defer func() { _ = store.Close(context.Background()) }()
		shared := memstore.NewLeases(memstore.LeasesOptions{})
		leasesA, leasesB := &soleLeases{Leases: shared}, &soleLeases{Leases: shared}

		var mu sync.Mutex
		var aEnded, bStarted time.Time
		a := soleRelay(t, store, leasesA, dur, func(ctx context.Context, e execstore.OutboxEntry) error {
			<-ctx.Done() // cut off: its handler never finishes by itself
			mu.Lock()
			aEnded = time.Now()
			mu.Unlock()
			return ctx.Err()
		}, nil)
		synctest.Wait()
		require.True(t, a.Stats().Holding)

		var reports []error
		b := soleRelay(t, store, leasesB, dur, func(ctx context.Context, e execstore.OutboxEntry) error {
			mu.Lock()
			if bStarted.IsZero() {
				bStarted = time.Now()
			}
			mu.Unlock()
			return nil
		}, func(err error) {
			mu.Lock()
			reports = append(reports, err)
			mu.Unlock()
		})
		synctest.Wait()
		st := b.Stats()
		assert.False(t, st.Holding, "b stands by")
		mu.Lock()
		require.Len(t, reports, 1)
		var re *Error
		require.ErrorAs(t, reports[0], &re)
		assert.ErrorIs(t, re, ErrStandingBy)
		assert.Equal(t, OpClaim, re.Op)
		assert.Equal(t, relayLeaseKey+"/sole", re.Item)
		mu.Unlock()

		commitEntry(t, store, "S")
		settleUntil(t, func() bool { return a.Stats().Delivered == 1 }, "a hands the entry out")
		cut := time.Now()
		leasesA.dead.Store(true)
		settleUntil(t, func() bool { return b.Stats().Acked == 1 }, "b takes over and delivers the entry")
		settleUntil(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return !aEnded.IsZero()
		}, "a's handler is cancelled")
		mu.Lock()
		defer mu.Unlock()
		assert.LessOrEqual(t, aEnded.Sub(cut), dur+dur/12, "a's handler was cancelled once its lease ran out, at its next look at its leases")
		assert.LessOrEqual(t, bStarted.Sub(cut), dur*5/4, "b took over within LeaseDuration×5/4 of a's last renewal")
		assert.True(t, b.Stats().Holding)
		assert.Len(t, reports, 1, "one report for the one stand-by")
	})
}
