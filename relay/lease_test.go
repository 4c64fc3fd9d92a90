package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// testLease is the lease the take-over tests run with: short, so that a take-over after a
// holder's death takes a couple of seconds, and long enough for renewals under load.
const testLease = 2 * time.Second

// leaseOptions are a relay's options with a lease in leases, polling often (the standby of
// another process learns of commits by polling).
func leaseOptions(leases relay.Leases) relay.Options {
	return relay.Options{Lease: leases, LeaseDuration: testLease, PollInterval: 20 * time.Millisecond,
		StopTimeout: 500 * time.Millisecond, RetryMin: time.Millisecond, RetryMax: 10 * time.Millisecond}
}

// processLeases is one process's view of a lease store shared in memory: once die is called,
// every call fails with execstore.ErrClosed, as a dead process's calls never arrive.
type processLeases struct {
	inner relay.Leases
	dead  atomic.Bool
}

func (p *processLeases) die() { p.dead.Store(true) }

func (p *processLeases) ClaimAs(ctx context.Context, key, fingerprint string, version int, lease time.Duration, holder string) (idem.Claim, error) {
	if p.dead.Load() {
		return idem.Claim{}, execstore.ErrClosed
	}
	return p.inner.ClaimAs(ctx, key, fingerprint, version, lease, holder)
}

func (p *processLeases) Complete(ctx context.Context, key, token string, resp idem.Response, retention time.Duration) (bool, error) {
	if p.dead.Load() {
		return false, execstore.ErrClosed
	}
	return p.inner.Complete(ctx, key, token, resp, retention)
}

func (p *processLeases) RenewAll(ctx context.Context, claims []idem.Held, lease time.Duration) ([]bool, error) {
	if p.dead.Load() {
		return nil, execstore.ErrClosed
	}
	return p.inner.RenewAll(ctx, claims, lease)
}

func (p *processLeases) Release(ctx context.Context, key, token string) (bool, error) {
	if p.dead.Load() {
		return false, execstore.ErrClosed
	}
	return p.inner.Release(ctx, key, token)
}

func (p *processLeases) List(ctx context.Context, prefix string, limit int) ([]idem.Record, error) {
	if p.dead.Load() {
		return nil, execstore.ErrClosed
	}
	return p.inner.List(ctx, prefix, limit)
}

// memLeases returns a memstore.Leases, closed when t ends. Inside a testing/synctest bubble
// its clock is the bubble's.
func memLeases(t *testing.T) *memstore.Leases {
	lz := memstore.NewLeases(memstore.LeasesOptions{})
	t.Cleanup(func() { _ = lz.Close(bg) })
	return lz
}

// leasesOpener opens one process's lease store over the leases its test's relays share, and
// returns the function that kills it (every later call of it fails).
type leasesOpener func() (relay.Leases, func())

// eachLeaseBackend runs f as a subtest on every backend, with the lease store the backend's
// processes share: on memstore, one memstore.Leases, in a testing/synctest bubble (virtual
// time); on aio, idem stores on the test server, in real time. f waits with settleUntil.
func eachLeaseBackend(t *testing.T, f func(t *testing.T, store execstore.Store, another func() execstore.Store, open leasesOpener)) {
	eachBackendSettled(t, func(t *testing.T, store execstore.Store, another func() execstore.Store) {
		if _, ok := store.(*memstore.Store); !ok {
			leaseDB := testserver.Database(t, "lease")
			f(t, store, another, func() (relay.Leases, func()) { return openLeases(t, leaseDB) })
			return
		}
		shared := memLeases(t)
		f(t, store, another, func() (relay.Leases, func()) {
			p := &processLeases{inner: shared}
			return p, p.die
		})
	})
}

// emitMany commits n entries to targets t0…t(targets-1) and returns their ids.
func emitMany(em *emitter, prefix string, n, targets int) []string {
	ids := make([]string, n)
	for i := range n {
		target := fmt.Sprintf("t%d", i%targets)
		seq := em.emit("s"+target, target, fmt.Sprintf("%s%d", prefix, i))
		ids[i] = entryID("s"+target, seq)
	}
	return ids
}

// splitID is entryID's inverse.
func splitID(t *testing.T, id string) (string, int64) {
	var source string
	var seq int64
	i := strings.LastIndexByte(id, '/')
	source = id[:i]
	_, err := fmt.Sscan(id[i+1:], &seq)
	require.NoError(t, err)
	return source, seq
}

// Two relays of two processes on one database, with a lease: one delivers, the other stands
// by; when the holder dies (its store and lease store gone, its lease never released), the
// standby takes the lapsed lease over and delivers everything committed since.
func TestStandbyTakesOver(t *testing.T) {
	eachLeaseBackend(t, func(t *testing.T, store execstore.Store, another func() execstore.Store, open leasesOpener) {
		leasesA, dieA := open()
		leasesB, _ := open()
		acks := newAckLog()
		pA, pB := newProbe(t, unpartitioned(t, store), acks), newProbe(t, unpartitioned(t, another()), acks)
		dA, dB := newDeliveries(t, acks), newDeliveries(t, acks)
		rA := relay.New(pA, dA.handle, leaseOptions(leasesA))
		stopA := run(t, rA)
		settleUntil(t, func() bool { return rA.Stats().Holding }, "A holds the lease")
		rB := relay.New(pB, dB.handle, leaseOptions(leasesB))
		stopB := run(t, rB)

		em := newEmitter(t, store)
		first := emitMany(em, "a", 30, 4)
		settleUntil(t, func() bool { return rA.Stats().Acked == 30 }, "A delivered the first entries")
		assert.False(t, rB.Stats().Holding, "B stands by")
		assert.Zero(t, rB.Stats().Delivered)

		// A dies: nothing of it reaches a server any more.
		// The lease store dies first: a session that sees its store fail gives its
		// lease up, and a release sent before the death would land.
		dieA()
		pA.kill()
		_ = stopA()

		second := emitMany(em, "b", 30, 4)
		settleUntil(t, func() bool { return rB.Stats().Acked == 30 }, "B delivered what was committed after A died")
		require.NoError(t, stopB())
		st := rB.Stats()
		assert.EqualValues(t, 1, st.Leases)
		assert.EqualValues(t, 1, st.TakeOvers, "B reclaimed A's lapsed lease")
		dA.check()
		dB.check()
		for _, id := range first {
			assert.Equal(t, 1, dA.handled[id], id)
		}
		for _, id := range second {
			assert.Equal(t, 1, dB.handled[id], id)
		}
		assert.Zero(t, pending(t, store))
	})
}

// A holder killed while a handler is blocked in a delivery: the standby takes over and
// delivers every entry the dead holder had not acked, the blocked one included, and none
// after its ack completed. Nothing is lost; the blocked entry is delivered twice (at least
// once across take-overs).
func TestKilledMidDelivery(t *testing.T) {
	eachLeaseBackend(t, func(t *testing.T, store execstore.Store, another func() execstore.Store, open leasesOpener) {
		leasesA, dieA := open()
		leasesB, _ := open()
		acksA, acksB := newAckLog(), newAckLog()
		pA, pB := newProbe(t, unpartitioned(t, store), acksA), newProbe(t, unpartitioned(t, another()), acksB)
		em := newEmitter(t, store)
		const n, targets = 60, 5
		ids := emitMany(em, "e", n, targets)
		blockedID := ids[n/3]

		// A's handler blocks on one entry, past its own death.
		dA := newDeliveries(t, acksA, acksB)
		blocked, unblock := make(chan struct{}), make(chan struct{})
		dA.fail = func(e execstore.OutboxEntry, _ int) error {
			if entryID(e.SourceID, e.Seq) == blockedID {
				close(blocked)
				<-unblock
			}
			return nil
		}
		rA := relay.New(pA, dA.handle, leaseOptions(leasesA))
		stopA := run(t, rA)
		settleUntil(t, func() bool { return rA.Stats().Holding }, "A holds the lease")
		dB := newDeliveries(t, acksA, acksB)
		rB := relay.New(pB, dB.handle, leaseOptions(leasesB))
		stopB := run(t, rB)

		select {
		case <-blocked:
		case <-time.After(waitLong):
			t.Fatal("A never reached the entry it blocks on")
		}
		settleUntil(t, func() bool { return rA.Stats().Acked > 0 }, "A acked entries of other targets")
		// The lease store dies first: a session that sees its store fail gives its
		// lease up, and a release sent before the death would land.
		dieA()
		pA.kill()
		settleUntil(t, func() bool { return pending(t, store) == 0 }, "B delivered everything A left")
		close(unblock) // A's handler returns nil; its ack cannot reach the store any more
		_ = stopA()
		require.NoError(t, stopB())

		dA.check()
		dB.check()
		for _, id := range ids {
			source, seq := splitID(t, id)
			if acksA.has(source, seq) {
				assert.Positive(t, dA.handled[id], "%s: A acked it, so its handler returned nil", id)
			} else {
				assert.Positive(t, dB.handled[id], "%s: A did not ack it, so B delivered it", id)
			}
		}
		assert.Equal(t, 1, dB.handled[blockedID], "B delivered the entry A was killed in")
		assert.EqualValues(t, 1, rB.Stats().TakeOvers)
	})
}

// A holder that can no longer renew its lease (its lease store does not answer) stops
// handing entries out before the lease lapses; the standby takes over and delivers what is
// committed after, and the stalled holder delivers none of it, though its execution store
// works. Once it can reach the lease store again it finds its lease taken over, and stands
// by.
func TestStalledHolderStopsDelivering(t *testing.T) {
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = store.Close(bg) })
	proxy, proxied := testserver.Proxied(t, srv.URI, "")
	leaseDB := testserver.Database(t, "lease")
	var optsA idem.Options
	optsA.Database = leaseDB
	leasesA, err := idem.Open(bg, proxied, optsA)
	require.NoError(t, err)
	t.Cleanup(func() { _ = leasesA.Close(bg) })
	leasesB, _ := openLeases(t, leaseDB)

	acks := newAckLog()
	dA, dB := newDeliveries(t, acks), newDeliveries(t, acks)
	var logA, logB bytes.Buffer
	optsRA, optsRB := leaseOptions(leasesA), leaseOptions(leasesB)
	optsRA.Logger, optsRB.Logger = slog.New(slog.NewJSONHandler(&logA, nil)), slog.New(slog.NewJSONHandler(&logB, nil))
	rA := relay.New(newProbe(t, unpartitioned(t, store), acks), dA.handle, optsRA)
	stopA := run(t, rA)
	eventually(t, func() bool { return rA.Stats().Holding }, "A holds the lease")
	rB := relay.New(newProbe(t, unpartitioned(t, store), acks), dB.handle, optsRB)
	stopB := run(t, rB)

	em := newEmitter(t, store)
	emitMany(em, "a", 10, 3)
	eventually(t, func() bool { return rA.Stats().Acked == 10 }, "A delivered")

	proxy.Stalled.Store(true)
	eventually(t, func() bool { return rB.Stats().Holding }, "B took over")
	delivered := rA.Stats().Delivered
	second := emitMany(em, "b", 20, 3)
	eventually(t, func() bool { return rB.Stats().Acked == 20 }, "B delivered what was committed after")
	assert.Equal(t, delivered, rA.Stats().Delivered, "the stalled holder delivered nothing more")
	for _, id := range second {
		assert.Zero(t, dA.handled[id], id)
	}

	proxy.Stalled.Store(false)
	eventually(t, func() bool { return rA.Stats().LeasesLost == 1 }, "A learnt it lost the lease")
	assert.False(t, rA.Stats().Holding)
	require.NoError(t, stopA())
	require.NoError(t, stopB())
	assert.EqualValues(t, 1, rB.Stats().TakeOvers)
	dA.check()
	dB.check()
	// The operator sees both: A's lost lease, B's take-over, each with the key.
	assert.Contains(t, logA.String(), `"level":"WARN","msg":"relay: lease lost: this relay no longer delivers the partition; its handlers' context is cancelled, what it left pending is delivered by the partition's next holder (this relay claims it again at its next look if it is still its share); if this repeats, the lease server answers too slowly for LeaseDuration: raise LeaseDuration, or give the relay a lease store of its own","key":"execstore/relay/outbox","partition":0`)
	assert.Contains(t, logB.String(), `"level":"INFO","msg":"relay: lease taken over from a holder whose lease had lapsed: the partition's pending items are delivered here from now on","key":"execstore/relay/outbox","partition":0`)
}

// A relay that stops cleanly releases its lease: the standby takes it over at once, as new,
// without waiting for it to lapse.
func TestCloseReleasesLease(t *testing.T) {
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = store.Close(bg) })
	leaseDB := testserver.Database(t, "lease")
	leasesA, _ := openLeases(t, leaseDB)
	leasesB, _ := openLeases(t, leaseDB)
	opts := leaseOptions(nil)
	opts.LeaseDuration = time.Hour // a take-over would never come
	// The release is what this test watches, and nothing stalls it: it runs under the
	// default StopTimeout, not leaseOptions' short one.
	opts.StopTimeout = 0
	opts.Lease = leasesA
	nop := func(context.Context, execstore.OutboxEntry) error { return nil }
	rA := relay.New(unpartitioned(t, store), nop, opts)
	resA := make(chan error, 1)
	go func() { resA <- rA.Run(bg) }()
	eventually(t, func() bool { return rA.Stats().Holding }, "A holds the lease")
	opts.Lease = leasesB
	opts.LeaseDuration = testLease
	rB := relay.New(unpartitioned(t, store), nop, opts)
	stopB := run(t, rB)

	require.NoError(t, rA.Close(bg))
	require.NoError(t, <-resA)
	eventually(t, func() bool { return rB.Stats().Holding }, "B took the released lease")
	newEmitter(t, store).emit("s", "t", "x")
	eventually(t, func() bool { return rB.Stats().Acked == 1 }, "B delivers")
	require.NoError(t, stopB())
	assert.EqualValues(t, 1, rB.Stats().Leases)
	assert.Zero(t, rB.Stats().TakeOvers, "the lease was released, not reclaimed")
}

// A lease key that holds something other than a relay's lease is refused: Run returns
// ErrLeaseKeyInUse rather than standing by for ever. For a store that is not partitioned that
// is Options.LeaseKey itself, and for one that is, a partition's key under it.
func TestLeaseKeyInUse(t *testing.T) {
	store := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = store.Close(bg) })
	leases, _ := openLeases(t, testserver.Database(t, "lease"))
	for _, c := range []struct {
		name  string
		setup func(key string)
	}{
		{"claimed for another request", func(key string) {
			_, err := leases.Claim(bg, key, "another request", 1, time.Hour)
			require.NoError(t, err)
		}},
		{"completed", func(key string) {
			c, err := leases.Claim(bg, key, "execstore/relay/lease", 1, time.Hour)
			require.NoError(t, err)
			_, err = leases.Complete(bg, key, c.Token, idem.Response{Status: 200}, time.Hour)
			require.NoError(t, err)
		}},
	} {
		for _, view := range []struct {
			name  string
			store execstore.Store
			key   func(prefix string) string
		}{
			{"unpartitioned", unpartitioned(t, store), func(prefix string) string { return prefix }},
			{"partitioned", store, func(prefix string) string { return prefix + "/partitions/0" }},
		} {
			t.Run(c.name+"/"+view.name, func(t *testing.T) {
				prefix := "key-" + c.name + "-" + view.name
				c.setup(view.key(prefix))
				r := relay.New(view.store, func(context.Context, execstore.OutboxEntry) error { return nil },
					relay.Options{Lease: leases, LeaseKey: prefix})
				err := r.Run(bg)
				assert.ErrorIs(t, err, relay.ErrLeaseKeyInUse)
				var re *relay.Error
				require.ErrorAs(t, err, &re)
				assert.Equal(t, relay.OpClaim, re.Op)
			})
		}
	}
}
