package relay_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/leases"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// Tests of four lease findings, in virtual time (testing/synctest) over memstore and
// memstore.Leases. Each relay sees the shared lease store through a gatedLeases of its
// own, which holds chosen calls at chosen points, so that each run is the same.

// findingsLease is every relay's LeaseDuration here.
const findingsLease = 3 * time.Second

// The lease store's calls, as gatedLeases names them.
const (
	callClaim    = "ClaimAs"
	callComplete = "Complete"
	callRenew    = "RenewAll"
	callRelease  = "Release"
	callList     = "List"
)

// gatedLeases is one relay's view of a memstore.Leases whose calls the test holds: at a
// gate, shut and opened by the test, and by a delay the test chooses per call.
type gatedLeases struct {
	inner *memstore.Leases

	mu      sync.Mutex
	gate    chan struct{}  // nil: open; closed when the gate opens
	calls   map[string]int // calls begun, by operation
	delayed int            // calls delay held
	// delay, when set, says how long call n (counted from 1 per operation) of op on keys
	// waits before it is applied (sent late) and after (answered late).
	delay func(op string, n int, keys []string) (before, after time.Duration)
}

func newGatedLeases(inner *memstore.Leases) *gatedLeases {
	return &gatedLeases{inner: inner, calls: map[string]int{}}
}

// shut makes every later call wait at the gate until open, or until its context ends.
func (g *gatedLeases) shut() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate == nil {
		g.gate = make(chan struct{})
	}
}

// open lets the calls waiting at the gate go, and the later ones pass.
func (g *gatedLeases) open() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gate != nil {
		close(g.gate)
		g.gate = nil
	}
}

// setDelay sets the delay of the later calls (nil: none).
func (g *gatedLeases) setDelay(f func(op string, n int, keys []string) (before, after time.Duration)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.delay = f
}

// count returns the calls of op begun so far, and the calls a delay held.
func (g *gatedLeases) count(op string) (calls, delayed int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[op], g.delayed
}

// gatedCall runs apply as the relay's call op on keys: it waits at the gate and for the
// delay before it, and for the delay after it. A call whose context ends at the gate or
// before it is applied is not applied; one whose context ends after is answered with an
// unknown outcome, as a network's would be.
func gatedCall[R any](ctx context.Context, g *gatedLeases, op string, keys []string, apply func() (R, error)) (R, error) {
	var zero R
	g.mu.Lock()
	g.calls[op]++
	n, gate, delay := g.calls[op], g.gate, g.delay
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
	var before, after time.Duration
	if delay != nil {
		if before, after = delay(op, n, keys); before > 0 || after > 0 {
			g.mu.Lock()
			g.delayed++
			g.mu.Unlock()
		}
	}
	if err := simWait(ctx, before); err != nil {
		return zero, err
	}
	res, err := apply()
	if werr := simWait(ctx, after); werr != nil {
		if err == nil {
			return zero, &execstore.OutcomeUnknownError{Op: op, ExecutionID: strings.Join(keys, ","), Err: werr}
		}
		return zero, werr
	}
	return res, err
}

func (g *gatedLeases) ClaimAs(ctx context.Context, key, fingerprint string, version int, lease time.Duration, holder string) (idem.Claim, error) {
	return gatedCall(ctx, g, callClaim, []string{key}, func() (idem.Claim, error) {
		return g.inner.ClaimAs(ctx, key, fingerprint, version, lease, holder)
	})
}

func (g *gatedLeases) Complete(ctx context.Context, key, token string, resp idem.Response, retention time.Duration) (bool, error) {
	return gatedCall(ctx, g, callComplete, []string{key}, func() (bool, error) {
		return g.inner.Complete(ctx, key, token, resp, retention)
	})
}

func (g *gatedLeases) RenewAll(ctx context.Context, claims []idem.Held, lease time.Duration) ([]bool, error) {
	keys := make([]string, len(claims))
	for i, c := range claims {
		keys[i] = c.Key
	}
	return gatedCall(ctx, g, callRenew, keys, func() ([]bool, error) { return g.inner.RenewAll(ctx, claims, lease) })
}

func (g *gatedLeases) Release(ctx context.Context, key, token string) (bool, error) {
	return gatedCall(ctx, g, callRelease, []string{key}, func() (bool, error) { return g.inner.Release(ctx, key, token) })
}

func (g *gatedLeases) List(ctx context.Context, prefix string, limit int) ([]idem.Record, error) {
	return gatedCall(ctx, g, callList, []string{prefix}, func() ([]idem.Record, error) {
		return g.inner.List(ctx, prefix, limit)
	})
}

// onePartition is a memstore.Store seen as a store of one partition, as a store that is not
// partitioned counts: its relays claim the lease key's one lease, and a scan of partition 0
// reads every pending entry.
type onePartition struct{ *memstore.Store }

func (onePartition) Partitions() int { return 1 }

func (s onePartition) PendingOutboxIn(ctx context.Context, _ []int, limit int) ([]execstore.OutboxEntry, error) {
	return s.PendingOutbox(ctx, limit)
}

// PendingOutboxExcept is the whole store's PendingOutbox without the sources except:
// onePartition's scans are the whole store's.
func (s onePartition) PendingOutboxExcept(ctx context.Context, _ []int, except []string, limit int) ([]execstore.OutboxEntry, error) {
	all, err := s.PendingOutbox(ctx, 0)
	var out []execstore.OutboxEntry
	for _, e := range all {
		if !slices.Contains(except, e.SourceID) && (limit == 0 || len(out) < limit) {
			out = append(out, e)
		}
	}
	return out, err
}

// findingsLog is what the relays of a test logged, shown when the test fails.
type findingsLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *findingsLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *findingsLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// findingsRun is one test's relays and what their handlers saw.
type findingsRun struct {
	t   *testing.T
	log *findingsLog

	mu      sync.Mutex
	busy    map[string]string         // the items in a handler now, and whose
	handled map[string]map[string]int // handler calls that returned nil, by relay, by item
	calls   map[string]int            // handler calls, by relay
	twice   []string                  // items handed to a handler while one had it
}

func newFindingsRun(t *testing.T) *findingsRun {
	f := &findingsRun{t: t, log: &findingsLog{}, busy: map[string]string{}, handled: map[string]map[string]int{},
		calls: map[string]int{}}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the relays' log:\n%s", f.log)
		}
	})
	return f
}

// handler is relay name's handler: each call takes 10ms, and is checked against the others.
func (f *findingsRun) handler(name string) func(context.Context, execstore.OutboxEntry) error {
	return func(ctx context.Context, e execstore.OutboxEntry) error {
		id := entryID(e.SourceID, e.Seq)
		f.mu.Lock()
		f.calls[name]++
		if other, ok := f.busy[id]; ok {
			f.twice = append(f.twice, fmt.Sprintf("%s handed to %s while %s's handler had it", id, name, other))
		}
		f.busy[id] = name
		f.mu.Unlock()
		time.Sleep(10 * time.Millisecond)
		f.mu.Lock()
		defer f.mu.Unlock()
		delete(f.busy, id)
		if f.handled[name] == nil {
			f.handled[name] = map[string]int{}
		}
		f.handled[name][id]++
		return nil
	}
}

// handledAll reports whether relay name's handler returned nil for every item of ids.
func (f *findingsRun) handledAll(name string, ids []string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, id := range ids {
		if f.handled[name][id] == 0 {
			return false
		}
	}
	return true
}

func (f *findingsRun) callsOf(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[name]
}

// check fails the test if an item was handed to a handler while one had it.
func (f *findingsRun) check() {
	f.mu.Lock()
	defer f.mu.Unlock()
	assert.Empty(f.t, f.twice, "items handled twice at once")
}

// options are relay name's options over lz.
func (f *findingsRun) options(name string, lz relay.Leases) relay.Options {
	return relay.Options{
		Lease: lz, LeaseDuration: findingsLease, PollInterval: 100 * time.Millisecond, Lanes: 4, Batch: 16,
		RetryMin: 10 * time.Millisecond, RetryMax: 200 * time.Millisecond, StopTimeout: time.Second,
		DeadCountInterval: -1,
		Logger:            slog.New(slog.NewTextHandler(f.log, nil)).With("relay", name),
	}
}

// bubbleRun is a relay's Run in progress.
type bubbleRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error // Run's result, once done is closed
}

// runInBubble runs r until stop, or until the test ends: its cleanup, on the bubble's main
// goroutine, waits for Run to return, so that the bubble's clock still moves while the
// relay stops.
func runInBubble(t *testing.T, r *relay.Relay) *bubbleRun {
	ctx, cancel := context.WithCancel(t.Context())
	s := &bubbleRun{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		s.err = r.Run(ctx)
	}()
	t.Cleanup(func() { _ = s.stop() })
	return s
}

// returned reports whether Run returned.
func (s *bubbleRun) returned() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// stop cancels Run and returns its result.
func (s *bubbleRun) stop() error {
	s.cancel()
	<-s.done
	return s.err
}

// holdsWithin waits until cond holds, for up to d of virtual time, failing the test after.
func holdsWithin(t *testing.T, d time.Duration, cond func() bool, msg string) {
	t.Helper()
	if !waitUpTo(d, cond) {
		t.Fatalf("not within %v: %s", d, msg)
	}
}

// waitUpTo waits until cond holds, for up to d of virtual time, and reports whether it did.
func waitUpTo(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for !cond() {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

// N2. Relays of different partition counts share a lease key after a member lease lapsed.
// a (64 partitions) holds them all; its lease calls are held until its member lease
// lapsed; b (1 partition) starts; then a's calls go. b's Run returns an error matching
// ErrPartitionsDisagree without its handler ever being called, and a delivers every entry
// committed, none in two handlers at once. The record LeaseKey/partitioning, which a wrote
// at its start, refuses b: no registration time is compared.
func TestN2PartitionCountsDisagreeAfterAMemberLeaseLapsed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memstore.New(memstore.Options{Partitions: 64})
		t.Cleanup(func() { _ = store.Close(context.Background()) })
		lz := memstore.NewLeases(memstore.LeasesOptions{})
		run := newFindingsRun(t)
		ga, gb := newGatedLeases(lz), newGatedLeases(lz)
		a := relay.New(store, run.handler("a"), run.options("a", ga))
		runA := runInBubble(t, a)
		holdsWithin(t, 10*time.Second, func() bool { return a.Stats().Partitions == 64 }, "a holds every partition")
		em := newEmitter(t, store)
		first := emitMany(em, "first", 64, 16)
		holdsWithin(t, 10*time.Second, func() bool { return run.handledAll("a", first) && pending(t, store) == 0 }, "a delivers")

		// a's lease calls wait at the gate until its member lease lapsed.
		ga.shut()
		time.Sleep(findingsLease + findingsLease/2)
		members, err := lz.List(context.Background(), leases.MembersPrefix(leases.RelayKey), 0)
		require.NoError(t, err)
		require.Len(t, members, 1)
		require.True(t, members[0].Lapsed, "a's member lease lapsed")

		b := relay.New(onePartition{store}, run.handler("b"), run.options("b", gb))
		runB := runInBubble(t, b)
		time.Sleep(findingsLease) // b's looks, while a's calls still wait
		ga.open()

		second := emitMany(em, "second", 64, 16)
		holdsWithin(t, 20*time.Second, func() bool { return pending(t, store) == 0 }, "the entries delivered")
		assert.True(t, run.handledAll("a", second), "a delivered every entry committed after its calls went")
		assert.True(t, waitUpTo(10*time.Second, runB.returned), "b's Run returns")
		assert.False(t, runA.returned(), "a's Run returned while it should run on")
		require.NoError(t, runA.stop())
		errB := runB.stop()
		assert.ErrorIs(t, errB, relay.ErrPartitionsDisagree, "b's Run")
		var rerr *relay.Error
		assert.ErrorAs(t, errB, &rerr, "b's Run returns an *Error")

		assert.Zero(t, run.callsOf("b"), "b's handler was never called")
		assert.Zero(t, b.Stats().Leases, "b took no lease")
		assert.Positive(t, a.Stats().LeasesLost, "a's leases ran out while its calls waited")
		run.check()
	})
}

// N2b. The same, by a registration race: b's lease writes (its claim of the partitioning
// record first) are held 700ms before they reach the lease store, while a, whose every
// call is answered 100ms late, claims the record, registers, lists the members and claims
// its partitions. In either order of the starts, b's Run returns an error matching
// ErrPartitionsDisagree, and the two relays never hold a partition at the same moment
// (sampled every millisecond).
func TestN2bPartitionCountsDisagreeInARegistrationRace(t *testing.T) {
	for _, c := range []struct {
		name   string
		aStart time.Duration // after b's
		bStart time.Duration // after a's
	}{
		// b's claim reaches the store at 800ms, while a claims its partitions.
		{name: "a first", bStart: 100 * time.Millisecond},
		// b's claim reaches the store at 700ms, while a claims its partitions.
		{name: "b first", aStart: 100 * time.Millisecond},
		// b's claim reaches the store at 700ms, while a's claim of the record (at 650ms) is
		// not yet completed (at 750ms).
		{name: "b first, a's record not completed", aStart: 650 * time.Millisecond},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				store := memstore.New(memstore.Options{Partitions: 64})
				t.Cleanup(func() { _ = store.Close(context.Background()) })
				lz := memstore.NewLeases(memstore.LeasesOptions{})
				run := newFindingsRun(t)
				ga, gb := newGatedLeases(lz), newGatedLeases(lz)
				ga.setDelay(func(string, int, []string) (time.Duration, time.Duration) { return 0, 100 * time.Millisecond })
				gb.setDelay(func(op string, _ int, _ []string) (time.Duration, time.Duration) {
					if op == callList {
						return 0, 0
					}
					return 700 * time.Millisecond, 0
				})
				a := relay.New(store, run.handler("a"), run.options("a", ga))
				b := relay.New(onePartition{store}, run.handler("b"), run.options("b", gb))

				both := make(chan string, 1)
				sampling, sampled := make(chan struct{}), make(chan struct{})
				t.Cleanup(func() { <-sampled })
				go func() { // every millisecond: do both hold partitions?
					defer close(sampled)
					tick := time.NewTicker(time.Millisecond)
					defer tick.Stop()
					for {
						select {
						case <-sampling:
							return
						case <-t.Context().Done():
							return
						case <-tick.C:
						}
						if pa, pb := a.Stats().Partitions, b.Stats().Partitions; pa > 0 && pb > 0 {
							select {
							case both <- fmt.Sprintf("at %v a held %d partitions and b %d", time.Now(), pa, pb):
							default:
							}
						}
					}
				}()

				time.Sleep(c.aStart)
				runA := runInBubble(t, a)
				time.Sleep(c.bStart)
				runB := runInBubble(t, b)
				assert.True(t, waitUpTo(10*time.Second, runB.returned), "b's Run returns")
				holdsWithin(t, 20*time.Second, func() bool { return a.Stats().Partitions == 64 }, "a holds every partition")
				entries := emitMany(newEmitter(t, store), "e", 64, 16)
				holdsWithin(t, 10*time.Second, func() bool { return pending(t, store) == 0 }, "the entries delivered")
				assert.True(t, run.handledAll("a", entries), "a delivered every entry")
				time.Sleep(findingsLease)
				close(sampling)
				<-sampled

				assert.False(t, runA.returned(), "a's Run returned while it should run on")
				require.NoError(t, runA.stop())
				assert.ErrorIs(t, runB.stop(), relay.ErrPartitionsDisagree, "b's Run")
				select {
				case s := <-both:
					t.Errorf("both relays held partitions: %s", s)
				default:
				}
				assert.Zero(t, b.Stats().Leases, "b took no lease")
				assert.Zero(t, run.callsOf("b"), "b's handler was never called")
				claims, delayed := gb.count(callClaim)
				assert.Positive(t, claims, "b claimed")
				assert.Positive(t, delayed, "b's writes were held")
				run.check()
			})
		})
	}
}

// N8. One late renewal loses nothing. Once the relay holds its partitions, one renewal is
// applied at once and answered 1.85s after it was sent, while the leases the renewal
// before it extended still hold: the renewals after it are not held up by it, so over 20s
// no lease is lost or taken again.
func TestN8OneLateRenewalLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const parts = 8
		store := memstore.New(memstore.Options{Partitions: parts})
		t.Cleanup(func() { _ = store.Close(context.Background()) })
		lz := memstore.NewLeases(memstore.LeasesOptions{})
		run := newFindingsRun(t)
		g := newGatedLeases(lz)
		r := relay.New(store, run.handler("r"), run.options("r", g))
		runR := runInBubble(t, r)
		holdsWithin(t, 10*time.Second, func() bool { return r.Stats().Partitions == parts }, "the relay holds every partition")

		var mu sync.Mutex
		var lateAt time.Time // when the late renewal was sent
		g.setDelay(func(op string, _ int, keys []string) (time.Duration, time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if op != callRenew || !lateAt.IsZero() || !strings.Contains(strings.Join(keys, " "), leases.PartitionsPrefix(leases.RelayKey)) {
				return 0, 0
			}
			lateAt = time.Now()
			return 0, 1850 * time.Millisecond
		})
		renewsBefore, _ := g.count(callRenew)
		entries := emitMany(newEmitter(t, store), "e", 64, 16)
		time.Sleep(20 * time.Second)

		mu.Lock()
		require.False(t, lateAt.IsZero(), "a renewal was answered late")
		mu.Unlock()
		renewsAfter, delayed := g.count(callRenew)
		assert.Equal(t, 1, delayed, "one call held")
		assert.Greater(t, renewsAfter-renewsBefore, 10, "the renewals went on")
		st := r.Stats()
		assert.Zero(t, st.LeasesLost, "leases lost")
		assert.Zero(t, st.ReTakes, "leases taken again")
		assert.Equal(t, int64(parts), st.Leases, "leases taken")
		assert.Equal(t, parts, st.Partitions, "partitions held")
		assert.True(t, run.handledAll("r", entries), "every entry delivered")
		assert.Zero(t, pending(t, store))
		require.NoError(t, runR.stop())
		run.check()
	})
}

// N8b. A steadily slow lease server: every call of the relay's (claims, completes,
// renewals, lists, releases) is applied at once and answered at a share of the lease. At
// 45% from the start the relay loses no lease, holds every partition, and delivers every
// entry. At 60% (below the 2/3 the package doc promises keeps every lease, pauses allowed),
// from the moment the relay holds its partitions, it loses no lease and holds every
// partition at the end.
func TestN8bSlowLeaseServer(t *testing.T) {
	for _, c := range []struct {
		name      string
		share     int  // of the lease, in percent
		afterHeld bool // slow once the relay holds every partition, not from the start
		deliver   bool
	}{
		{name: "45% from the start", share: 45, deliver: true},
		{name: "60% once the partitions are held", share: 60, afterHeld: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				const parts = 8
				store := memstore.New(memstore.Options{Partitions: parts})
				t.Cleanup(func() { _ = store.Close(context.Background()) })
				lz := memstore.NewLeases(memstore.LeasesOptions{})
				run := newFindingsRun(t)
				g := newGatedLeases(lz)
				late := findingsLease * time.Duration(c.share) / 100
				slow := func(string, int, []string) (time.Duration, time.Duration) { return 0, late }
				if !c.afterHeld {
					g.setDelay(slow)
				}
				r := relay.New(store, run.handler("r"), run.options("r", g))
				runR := runInBubble(t, r)
				if c.afterHeld {
					holdsWithin(t, 10*time.Second, func() bool { return r.Stats().Partitions == parts }, "the relay holds every partition")
					g.setDelay(slow)
				}
				time.Sleep(30 * time.Second)
				var entries []string
				if c.deliver {
					entries = emitMany(newEmitter(t, store), "e", 64, 16)
				}
				time.Sleep(30 * time.Second)

				st := r.Stats()
				assert.Zero(t, st.LeasesLost, "leases lost")
				assert.Equal(t, parts, st.Partitions, "partitions held at the end")
				if c.deliver {
					assert.True(t, run.handledAll("r", entries), "every entry delivered")
					assert.Zero(t, pending(t, store), "entries pending")
				}
				renews, delayed := g.count(callRenew)
				assert.Greater(t, renews, 20, "renewals sent")
				assert.Greater(t, delayed, 20, "calls held")
				require.NoError(t, runR.stop())
				run.check()
			})
		})
	}
}
