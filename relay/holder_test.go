package relay_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/aiotest"
	"github.com/execstore/execstore/internal/leases"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// blocking is a handler that holds the entry it is given until the test lets it go,
// whatever its context says, and counts its calls.
type blocking struct {
	mu      sync.Mutex
	calls   int
	entered chan string
	release chan struct{}
}

func newBlocking() *blocking {
	return &blocking{entered: make(chan string, 256), release: make(chan struct{})}
}

func (b *blocking) handle(_ context.Context, e execstore.OutboxEntry) error {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	b.entered <- entryID(e.SourceID, e.Seq)
	<-b.release
	return nil
}

// The end of Run's context stops the handing out at once, but the relay keeps renewing its
// lease while a handler that ignores its context still runs: the standby does not take the
// partition over during that time, though it is many times the lease's length. Once the
// handler returned, the lease is released and the standby takes it at once. In virtual time,
// over memstore.Leases.
func TestLeaseKeptUntilTheHandlersReturned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		lz := memLeases(t)
		optsA := leaseOptions(lz)
		optsA.LeaseDuration = 1500 * time.Millisecond
		h := newBlocking()
		rA := relay.New(unpartitioned(t, store), h.handle, optsA)
		stopA := run(t, rA)
		settleUntil(t, func() bool { return rA.Stats().Holding }, "A holds the lease")
		newEmitter(t, store).emit("s", "t", "x")
		<-h.entered

		optsB := leaseOptions(lz)
		optsB.LeaseDuration = 1500 * time.Millisecond
		rB := relay.New(unpartitioned(t, store), func(context.Context, execstore.OutboxEntry) error { return nil }, optsB)
		stopB := run(t, rB)
		stopped := make(chan error, 1)
		go func() { stopped <- stopA() }() // Run's context ends; the handler does not return
		time.Sleep(5 * optsA.LeaseDuration)
		assert.Zero(t, rB.Stats().Leases, "B took no lease while A's handler ran")
		assert.Zero(t, rA.Stats().LeasesLost)
		close(h.release)
		require.NoError(t, <-stopped)
		settleUntil(t, func() bool { return rB.Stats().Holding }, "B took the released lease")
		require.NoError(t, stopB())
		assert.Zero(t, rB.Stats().TakeOvers, "released, not lapsed")
		assert.Empty(t, pendingIDs(t, store), "the entry A's handler finished was acked")
	})
}

// pendingIDs lists the pending entries.
func pendingIDs(t *testing.T, store execstore.Store) []string {
	p, err := store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	var ids []string
	for _, e := range p {
		ids = append(ids, entryID(e.SourceID, e.Seq))
	}
	return ids
}

// Relays of one lease key whose stores count different partitions would each deliver what
// it thinks is its share: entries twice, others never. The relay that registers last sees
// the other and gives way before it claims anything: Run returns ErrPartitionsDisagree. The
// first goes on delivering everything. In virtual time, over memstore.Leases.
func TestRelaysThatDisagreeOnThePartitions(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T, store *memstore.Store) execstore.Store
		want  string
	}{
		{"not partitioned", func(t *testing.T, store *memstore.Store) execstore.Store { return unpartitioned(t, store) },
			"this relay has 1 partitions"},
		{"9 partitions", func(t *testing.T, _ *memstore.Store) execstore.Store {
			nine := memstore.New(memstore.Options{Partitions: 9})
			t.Cleanup(func() { _ = nine.Close(bg) })
			return nine
		}, "this relay has 9 partitions"},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := newMemstore(t)
				lz := memLeases(t)
				d := newDeliveries(t, newAckLog())
				rA := relay.New(store, d.handle, leaseOptions(lz))
				stopA := run(t, rA)
				settleUntil(t, func() bool { return rA.Stats().Partitions == execstore.DefaultPartitions }, "A holds every partition")

				var errs []error
				var mu sync.Mutex
				opts := leaseOptions(lz)
				opts.OnError = func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
				rB := relay.New(c.store(t, store), func(context.Context, execstore.OutboxEntry) error {
					t.Error("B delivered")
					return nil
				}, opts)
				ctx, cancel := context.WithTimeout(bg, waitLong)
				defer cancel()
				err := rB.Run(ctx)
				require.ErrorIs(t, err, relay.ErrPartitionsDisagree)
				assert.ErrorContains(t, err, c.want)
				assert.ErrorContains(t, err, fmt.Sprintf("has %d", execstore.DefaultPartitions))
				assert.Zero(t, rB.Stats().Leases, "B claimed no partition")

				em := newEmitter(t, store)
				ids := emitMany(em, "x", 20, 5)
				settleUntil(t, func() bool { return rA.Stats().Acked == 20 }, "A delivered every entry")
				require.NoError(t, stopA())
				for _, id := range ids {
					assert.Equal(t, 1, d.handled[id], id)
				}
				d.check()
			})
		})
	}
}

// A relay of an earlier version, which shares the partitions by another rule, is left out of
// the share, with an error saying so: the relays of one rule share every partition among
// themselves, so none goes unwanted while versions mix. In virtual time, over
// memstore.Leases, with the earlier relay's registration written as it wrote it.
func TestRelayOfAnotherShareRuleIsLeftOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		lz := memLeases(t)
		_, err := lz.ClaimAs(bg, leases.MemberKey(leases.RelayKey, "earlier-1"), leases.PartitioningFingerprint(execstore.DefaultPartitions),
			1, time.Hour, "earlier-1")
		require.NoError(t, err)

		var errs []error
		var mu sync.Mutex
		opts := leaseOptions(lz)
		opts.OnError = func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() }
		d := newDeliveries(t, newAckLog())
		r := relay.New(store, d.handle, opts)
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Partitions == execstore.DefaultPartitions }, "the relay holds every partition")
		ids := emitMany(newEmitter(t, store), "x", 20, 5)
		settleUntil(t, func() bool { return r.Stats().Acked == 20 }, "the relay delivered every entry")
		require.NoError(t, stop())
		for _, id := range ids {
			assert.Equal(t, 1, d.handled[id], id)
		}
		d.check()

		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, errs)
		assert.ErrorIs(t, errs[0], relay.ErrPartitionsDisagree)
		assert.ErrorContains(t, errs[0], "relay earlier-1 shares the 64 partitions by the rule of earlier versions, the (p mod n)-th of n relays, "+
			`this relay by "rendezvous": it is left out of the share`)
	})
}

// One of the relay's 64 leases is fenced (taken by another holder): the next renewal drops
// that partition alone, and the relay keeps the 63 others. In virtual time, over
// memstore.Leases.
func TestFencedLeaseDroppedAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		lz := memLeases(t)
		view := newLeaseGate(lz)
		opts := leaseOptions(view)
		opts.LeaseDuration = 3 * time.Second
		r := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil }, opts)
		stop := run(t, r)
		settleUntil(t, func() bool { return r.Stats().Partitions == execstore.DefaultPartitions }, "every partition held")

		// Another holder takes partition 5's lease: its record is removed, as a lease store's
		// reaper or an operator would, and claimed anew.
		key := "execstore/relay/outbox/partitions/5"
		released, err := lz.Release(bg, key, view.token(key))
		require.NoError(t, err)
		require.True(t, released)
		c, err := lz.ClaimAs(bg, key, "execstore/relay/lease", 1, time.Hour, "another holder")
		require.NoError(t, err)
		require.True(t, c.Held())

		// The next renewal, due within LeaseDuration/3, finds it fenced; the lease itself
		// would not run out before 2/3 of LeaseDuration.
		settleWithin(t, opts.LeaseDuration/2, func() bool { return r.Stats().LeasesLost == 1 },
			"the fenced lease dropped at the next renewal")
		time.Sleep(2 * opts.LeaseDuration) // renewals go on
		st := r.Stats()
		assert.EqualValues(t, 1, st.LeasesLost, "no other lease lost")
		assert.Equal(t, execstore.DefaultPartitions-1, st.Partitions)
		require.NoError(t, stop())
	})
}

// A relay closed while it hands partitions over (a relay joined, and a handler of each
// partition still runs) releases those leases once the handlers returned, on a context the
// stop did not cancel: the newcomer takes them as released, not as lapsed. In virtual time,
// over memstore.Leases.
func TestCloseDuringAHandOverReleasesTheLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		lz := memLeases(t)
		opts := leaseOptions(lz)
		opts.StopTimeout = 0
		opts.LeaseDuration = 2 * testLease
		h := newBlocking()
		rA := relay.New(store, h.handle, opts)
		resA := make(chan error, 1)
		go func() { resA <- rA.Run(bg) }()
		settleUntil(t, func() bool { return rA.Stats().Partitions == execstore.DefaultPartitions }, "A holds every partition")
		// One entry in each partition, each in flight: in its handler, or queued behind one.
		emitOnePerPartition(t, store)
		settleUntil(t, func() bool { return rA.Stats().InFlight == execstore.DefaultPartitions }, "an entry of each partition in flight")
		rB := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil }, opts)
		stopB := run(t, rB)
		settleUntil(t, func() bool {
			recs, err := lz.List(bg, "execstore/relay/outbox/members/", 0)
			require.NoError(t, err)
			return len(recs) == 2
		}, "B registered")
		time.Sleep(opts.LeaseDuration / 2) // A's next looks: it hands B's share over, and waits for its handlers
		// A partition whose entry only waited in a lane is released at once; one whose entry is
		// in its handler is not.
		assert.Less(t, rB.Stats().Leases, int64(execstore.DefaultPartitions/2), "no partition released while its handler runs")
		closed := make(chan error, 1)
		go func() { closed <- rA.Close(bg) }()
		close(h.release)
		require.NoError(t, <-closed)
		require.NoError(t, <-resA)
		settleUntil(t, func() bool { return rB.Stats().Partitions == execstore.DefaultPartitions }, "B took every partition")
		settleUntil(t, func() bool { return len(pendingIDs(t, store)) == 0 }, "what A left queued delivered by B")
		require.NoError(t, stopB())
		assert.Zero(t, rB.Stats().TakeOvers, "every lease released, none lapsed")
	})
}

// The execution store's server stalls (every data command held) for several lease lengths
// while the lease store, a store of its own, answers: the relay's scans and acks wait, but
// its leases are renewed all along, and none is lost. Once the store answers again, what
// was committed is delivered.
func TestLeasesHoldWhileTheStoreStalls(t *testing.T) {
	proxy, proxied := testserver.Proxied(t, srv.URI, "")
	var opts aio.Options
	opts.Database = testserver.Database(t, "relay")
	store, _ := aiotest.Open(t, proxied, opts)
	leases, _ := openLeases(t, testserver.Database(t, "lease"))
	lo := leaseOptions(leases)
	lo.LeaseDuration = 3 * time.Second
	r := relay.New(store, func(context.Context, execstore.OutboxEntry) error { return nil }, lo)
	stop := run(t, r)
	eventually(t, func() bool { return r.Stats().Partitions == execstore.DefaultPartitions }, "every partition held")
	em := newEmitter(t, store)
	em.emit("s", "t", "x")
	eventually(t, func() bool { return r.Stats().Acked == 1 }, "delivered")

	proxy.Stalled.Store(true)
	time.Sleep(2 * lo.LeaseDuration)
	st := r.Stats()
	proxy.Stalled.Store(false)
	assert.Zero(t, st.LeasesLost, "no lease lost while the store stalled")
	assert.Equal(t, execstore.DefaultPartitions, st.Partitions)
	em.emit("s", "t", "y")
	eventually(t, func() bool { return r.Stats().Acked == 2 }, "delivered once the store answers")
	require.NoError(t, stop())
	assert.Zero(t, r.Stats().LeasesLost)
}

// leaseGate is a relay's view of a lease store whose renewals the test holds. Once armed, it
// lets renewals (RenewAll) pass until pick chooses one, sent at a moment it likes relative to
// the relay's last look (its List of the members' records); from then on it holds every
// renewal until opened, or until the renewal's context ends, and counts the claims (ClaimAs)
// begun meanwhile. It remembers the token of every lease a claim got.
type leaseGate struct {
	relay.Leases

	mu       sync.Mutex
	pick     func(now, lastLook time.Time) bool // nil: not armed
	shut     chan struct{}                      // nil: renewals pass
	shutAt   time.Time                          // when the first held renewal was sent
	lastLook time.Time
	passed   time.Time // when the last renewal that was not held was sent
	held     int       // renewals being held now
	claims   int       // claims begun while shut
	tokens   map[string]string
}

func newLeaseGate(inner relay.Leases) *leaseGate {
	return &leaseGate{Leases: inner, tokens: map[string]string{}}
}

func (g *leaseGate) ClaimAs(ctx context.Context, key, fingerprint string, version int, lease time.Duration, holder string) (idem.Claim, error) {
	g.mu.Lock()
	if g.shut != nil {
		g.claims++
	}
	g.mu.Unlock()
	c, err := g.Leases.ClaimAs(ctx, key, fingerprint, version, lease, holder)
	if err == nil && c.Held() {
		g.mu.Lock()
		g.tokens[key] = c.Token
		g.mu.Unlock()
	}
	return c, err
}

func (g *leaseGate) List(ctx context.Context, prefix string, limit int) ([]idem.Record, error) {
	if strings.HasSuffix(prefix, "/members/") {
		g.mu.Lock()
		g.lastLook = time.Now()
		g.mu.Unlock()
	}
	return g.Leases.List(ctx, prefix, limit)
}

func (g *leaseGate) RenewAll(ctx context.Context, claims []idem.Held, lease time.Duration) ([]bool, error) {
	now := time.Now()
	g.mu.Lock()
	if g.shut == nil && g.pick != nil && !g.lastLook.IsZero() && g.pick(now, g.lastLook) {
		g.shut, g.shutAt, g.pick = make(chan struct{}), now, nil
	}
	shut := g.shut
	if shut != nil {
		g.held++
	} else {
		g.passed = now
	}
	g.mu.Unlock()
	if shut != nil {
		select {
		case <-shut:
		case <-ctx.Done():
		}
		g.mu.Lock()
		g.held--
		g.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return g.Leases.RenewAll(ctx, claims, lease)
}

// token is the token of key's lease the last claim through g got.
func (g *leaseGate) token(key string) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.tokens[key]
}

// closeWhen arms the gate: the first renewal for which pick returns true, and every one
// after it, is held.
func (g *leaseGate) closeWhen(pick func(now, lastLook time.Time) bool) {
	g.mu.Lock()
	g.pick = pick
	g.mu.Unlock()
}

func (g *leaseGate) open() {
	g.mu.Lock()
	g.pick = nil
	if g.shut != nil {
		close(g.shut)
		g.shut = nil
	}
	g.mu.Unlock()
}

// state says how many renewals are held now, how many claims were begun since the gate shut,
// and when it shut (zero: not yet).
func (g *leaseGate) state() (held, claims int, shutAt time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held, g.claims, g.shutAt
}

// passedAt is when the last renewal that was not held was sent.
func (g *leaseGate) passedAt() time.Time {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.passed
}

// A relay whose renewal is late lets it go first: the look that finds it late claims
// nothing (on a lease server that runs one write at a time, a claim would queue ahead of the
// renewal that keeps the relay's own leases), and the next claims all the same, so that a
// relay whose renewals are always slow still takes its share. A and B share the partitions;
// A's renewal is held at its view of the lease store; B stops, releasing its half. A's first
// look after that sends no claim; the next takes the free half while the renewal is still
// held, within A's leases' validity. In virtual time, over memstore.Leases.
//
// Timing, with the lease at 8s: A renews every 2.67s and looks every 2s; a renewal is late
// after 1.33s, and A's leases run out 5.33s after the held renewal was sent (8s after the
// one before it). The look that waits (W) must come after the renewal is late and B's half
// is free, and the one after it (W+2s) must claim before the leases run out; so the gate
// holds a renewal sent 1.45–2.15s before W (one in two or three is: the phase of renewals
// against looks shifts by 0.67s a renewal). B stops 0.25s after it, once any look just
// before W's predecessor is over.
func TestClaimsWaitALookForALateRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		lz := memLeases(t)
		gate := newLeaseGate(lz)

		const dur = 8 * time.Second
		const lookEvery, lateAfter = dur / 4, dur / 6
		var logA lockedLog
		optsA, optsB := leaseOptions(gate), leaseOptions(lz)
		optsA.LeaseDuration, optsB.LeaseDuration = dur, dur
		optsA.Logger = slog.New(slog.NewTextHandler(&logA, nil))
		// B's releases at its stop are what frees its half: they get the default StopTimeout,
		// not leaseOptions' short one, and what failed of them is told. (A release that fails
		// leaves the lease to lapse, a LeaseDuration later, and A's claim comes after that.)
		optsB.StopTimeout = 0
		var errsB lockedLog
		optsB.OnError = func(err error) { fmt.Fprintln(&errsB, err) }
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("A's log:\n%s", logA.String())
				t.Logf("B's errors:\n%s", errsB.String())
			}
		})
		handle := func(context.Context, execstore.OutboxEntry) error { return nil }
		rA, rB := relay.New(store, handle, optsA), relay.New(store, handle, optsB)
		stopA := run(t, rA)
		stopB := run(t, rB)
		t.Cleanup(gate.open) // before the relays' cleanups: a failed test leaves no renewal held
		half := execstore.DefaultPartitions / 2
		settleUntil(t, func() bool { return rA.Stats().Partitions == half && rB.Stats().Partitions == half }, "A and B hold half each")

		gate.closeWhen(func(now, lastLook time.Time) bool {
			w := lastLook // the first look more than lateAfter+0.12s after now
			for !w.After(now.Add(lateAfter + 120*time.Millisecond)) {
				w = w.Add(lookEvery)
			}
			t.Logf("a renewal sent %v after a look: the look that would wait in %v", now.Sub(lastLook).Round(time.Millisecond), w.Sub(now).Round(time.Millisecond))
			return w.Sub(now) < lateAfter+820*time.Millisecond
		})
		var shutAt time.Time
		settleWithin(t, 6*dur, func() bool { held, _, at := gate.state(); shutAt = at; return held > 0 }, "A's renewal is held")
		time.Sleep(time.Until(shutAt.Add(250 * time.Millisecond)))
		const waits = "relay: claims wait"
		before := strings.Count(logA.String(), waits)
		require.NoError(t, stopB()) // B releases its half
		require.Empty(t, errsB.String(), "B released every lease it held")
		settleUntil(t, func() bool { return strings.Count(logA.String(), waits) > before }, "A looks, and its claims wait")
		_, claims, _ := gate.state()
		assert.Zero(t, claims, "A claimed at the look that found its renewal late")
		assert.Equal(t, half, rA.Stats().Partitions, "A kept its own half, and took no other yet")
		assert.Greater(t, time.Since(shutAt), lateAfter, "A's renewal was late at that look")

		settleUntil(t, func() bool { return rA.Stats().Partitions == execstore.DefaultPartitions }, "A's next look claims the free half")
		t.Logf("A held all %d partitions %v after its renewal was held", execstore.DefaultPartitions, time.Since(shutAt).Round(time.Millisecond))
		held, _, _ := gate.state()
		assert.Positive(t, held, "the renewal was still held")
		assert.Less(t, time.Since(shutAt), dur*2/3, "A claimed while its leases were valid")
		gate.open()
		require.NoError(t, stopA())
		assert.Zero(t, rA.Stats().LeasesLost)
	})
}

// A renewal answered late, after the relay stopped handing its partitions out but before
// the leases ran out, has the relay scan at once: what another process committed meanwhile
// is delivered without waiting for the next poll (an hour here). The gate holds the
// renewal sent after the one that passed at P: the leases stop being live at P+5/6·dur and
// the renewal gives up at P+11/12·dur, so it is let go at P+7/8·dur. In virtual time, over
// memstore.Leases.
func TestLateRenewalResumesDeliveryAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		gate := newLeaseGate(memLeases(t))

		const dur = 8 * time.Second
		opts := leaseOptions(gate)
		opts.LeaseDuration, opts.PollInterval = dur, time.Hour
		// Through a store with no wake-up signal, the relay learns of commits by its scans alone.
		r := relay.New(struct{ execstore.Store }{store}, func(context.Context, execstore.OutboxEntry) error { return nil }, opts)
		em := newEmitter(t, store)
		em.emit("s", "t", "x")
		stop := run(t, r)
		t.Cleanup(gate.open) // before the relay's cleanup: a failed test leaves no renewal held
		settleUntil(t, func() bool { return r.Stats().Acked == 1 }, "delivered by the scan the take owed")

		settleWithin(t, 2*dur, func() bool { return !gate.passedAt().IsZero() }, "a renewal passed")
		gate.closeWhen(func(time.Time, time.Time) bool { return true })
		settleWithin(t, 2*dur, func() bool { held, _, _ := gate.state(); return held > 0 }, "a renewal is held")
		passed := gate.passedAt()
		em.emit("s", "t", "y") // no scan reads it while the renewal is held: none is owed
		time.Sleep(time.Until(passed.Add(dur * 7 / 8)))
		st := r.Stats()
		assert.EqualValues(t, 1, st.Acked, "nothing delivered meanwhile")
		scans := st.Scans
		gate.open()
		settleUntil(t, func() bool { return r.Stats().Acked == 2 }, "y delivered once the renewal came back")
		require.NoError(t, stop())
		st = r.Stats()
		assert.Zero(t, st.LeasesLost, "the late renewal kept the lease")
		assert.Greater(t, st.Scans, scans)
	})
}

// lockedLog is a log sink that a relay's goroutines write while the test reads it.
type lockedLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// A hand-over waits for the handlers of the partitions handed over, but not for ever: a
// handler that waits for its context is cancelled LeaseDuration after the hand-over began,
// its entry stays pending, the lease is released, and the relay it was handed to delivers
// the entry. A holds every partition, each with an entry whose handler waits for its
// context; B joins, and A hands B's share over. In virtual time, over memstore.Leases.
func TestHandOverCancelsHandlersThatOutlastALease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newMemstore(t)
		lz := memLeases(t)
		opts := leaseOptions(lz)
		// The hand-over's cancel waits one LeaseDuration.
		opts.LeaseDuration = 3 * testLease
		var started, cancelled sync.Map // entry id → true; the cause A's handler saw
		rA := relay.New(store, func(ctx context.Context, e execstore.OutboxEntry) error {
			started.Store(entryID(e.SourceID, e.Seq), true)
			<-ctx.Done()
			cancelled.Store(entryID(e.SourceID, e.Seq), context.Cause(ctx))
			return ctx.Err()
		}, opts)
		stopA := run(t, rA)
		settleUntil(t, func() bool { return rA.Stats().Partitions == execstore.DefaultPartitions }, "A holds every partition")
		emitOnePerPartition(t, store)
		settleUntil(t, func() bool { return rA.Stats().InFlight == execstore.DefaultPartitions }, "an entry of each partition in A's handlers")

		var mu sync.Mutex
		deliveredByB := map[string]bool{}
		rB := relay.New(store, func(_ context.Context, e execstore.OutboxEntry) error {
			mu.Lock()
			defer mu.Unlock()
			deliveredByB[entryID(e.SourceID, e.Seq)] = true
			return nil
		}, opts)
		stopB := run(t, rB)
		share := execstore.DefaultPartitions / 2
		settleUntil(t, func() bool { return rB.Stats().Partitions == share }, "B took its share from A")
		settleUntil(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(deliveredByB) == share
		}, "B delivered the entries of its share")
		require.NoError(t, stopB())
		mu.Lock()
		inHandler := 0 // of B's share, in A's handler when the hand-over began; the others waited in a lane
		for id := range deliveredByB {
			if _, ok := started.Load(id); !ok {
				continue
			}
			inHandler++
			cause, ok := cancelled.Load(id)
			if assert.True(t, ok, "A's handler of %s was cancelled", id) {
				assert.ErrorContains(t, cause.(error), "handed over", id)
			}
		}
		mu.Unlock()
		assert.NotZero(t, inHandler, "some of B's share was in A's handlers")
		assert.Zero(t, rB.Stats().TakeOvers, "released by A, not lapsed")
		require.NoError(t, stopA())
		assert.Zero(t, rA.Stats().LeasesLost)
	})
}

// emitOnePerPartition commits one entry in each of the store's DefaultPartitions partitions,
// each from an execution of its own to itself.
func emitOnePerPartition(t *testing.T, store execstore.Store) {
	em := newEmitter(t, store)
	covered := map[int]bool{}
	for i := 0; len(covered) < execstore.DefaultPartitions; i++ {
		id := fmt.Sprintf("s%d", i)
		if p := execstore.PartitionOf(id, execstore.DefaultPartitions); !covered[p] {
			covered[p] = true
			em.emit(id, id, "x")
		}
	}
}
