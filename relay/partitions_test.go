package relay_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// holdLog records the partition events of several relays.
type holdLog struct {
	mu     sync.Mutex
	events map[int][]holdEvent // by partition
}

type holdEvent struct {
	relay string
	relay.PartitionEvent
}

func newHoldLog() *holdLog { return &holdLog{events: map[int][]holdEvent{}} }

func (l *holdLog) of(name string) func(relay.PartitionEvent) {
	return func(e relay.PartitionEvent) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.events[e.Partition] = append(l.events[e.Partition], holdEvent{name, e})
	}
}

// check asserts that no partition was handed out by two relays at one moment: each hold, from
// when its relay could start handing its items out (the claim's answer, Local) to when it
// stopped (At), ends before the next begins. A relay still holding a partition holds it
// until now. (A take's At, its lease's start by the server's clock, is read before the claim
// is written: on a busy server it can come before the previous holder released the lease.)
func (l *holdLog) check(t *testing.T) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for p, evs := range l.events {
		type span struct {
			relay    string
			from, to time.Time
		}
		var spans []span
		open := map[string]time.Time{}
		for _, e := range evs {
			if e.Held {
				open[e.relay] = e.Local
				continue
			}
			if from, ok := open[e.relay]; ok {
				spans = append(spans, span{e.relay, from, e.At})
				delete(open, e.relay)
			}
		}
		for r, from := range open {
			spans = append(spans, span{r, from, time.Now()})
		}
		sort.Slice(spans, func(i, j int) bool { return spans[i].from.Before(spans[j].from) })
		for i := 1; i < len(spans); i++ {
			assert.False(t, spans[i].from.Before(spans[i-1].to),
				"partition %d: %s held it from %v while %s did until %v; its events:\n%s", p, spans[i].relay, spans[i].from,
				spans[i-1].relay, spans[i-1].to, holdEvents(evs))
		}
	}
}

// holdEvents is evs, one a line, for a failure's message.
func holdEvents(evs []holdEvent) string {
	var b strings.Builder
	for _, e := range evs {
		fmt.Fprintf(&b, "  %s held=%v takeOver=%v reTake=%v at=%s local=%s\n", e.relay, e.Held, e.TakeOver, e.ReTake,
			e.At.Format("15:04:05.000000"), e.Local.Format("15:04:05.000000"))
	}
	return b.String()
}

// Relays of several processes share the partitions: two take half each; a third joining
// takes its share, handed over by the others; when one dies, the others take its
// partitions over once its leases lapse. Every entry is delivered by the relay holding its
// source's partition, and no partition is ever held by two at once. On memstore in virtual
// time, on aio in real time.
// serverShareLease is TestRelaysShareThePartitions's LeaseDuration on a real server. With
// testLease (2s), the suite run under two CPU hogs on the embedded server lost leases there
// (renewals answered later than LeaseDuration×2/3), and the three relays' shares did not
// settle within waitLong.
const serverShareLease = 6 * time.Second

func TestRelaysShareThePartitions(t *testing.T) {
	eachLeaseBackend(t, func(t *testing.T, store execstore.Store, another func() execstore.Store, open leasesOpener) {
		ps, ok := store.(execstore.Partitioned)
		require.True(t, ok, "%T is partitioned", store)
		n := ps.Partitions()
		acks := newAckLog()
		holds := newHoldLog()
		type member struct {
			r     *relay.Relay
			d     *deliveries
			p     *probe
			stop  func() error
			die   func()
			alive bool
		}
		start := func(name string, s execstore.Store) *member {
			leases, die := open()
			m := &member{d: newDeliveries(t, acks), p: newProbe(t, s, acks), die: die, alive: true}
			opts := leaseOptions(leases)
			opts.OnPartition = holds.of(name)
			if _, inMemory := store.(*memstore.Store); !inMemory {
				opts.LeaseDuration = serverShareLease
			}
			m.r = relay.New(m.p, m.d.handle, opts)
			m.stop = run(t, m.r)
			return m
		}
		shares := func(ms ...*member) func() bool {
			return func() bool {
				total := 0
				for _, m := range ms {
					got := m.r.Stats().Partitions
					if got < n/len(ms) || got > (n+len(ms)-1)/len(ms) {
						return false
					}
					total += got
				}
				return total == n
			}
		}
		a := start("a", store)
		b := start("b", another())
		settleUntil(t, shares(a, b), "a and b hold half each")

		em := newEmitter(t, store)
		first := emitMany(em, "first", 120, 24)
		settleUntil(t, func() bool { return a.r.Stats().Acked+b.r.Stats().Acked == 120 }, "the first entries delivered")
		for _, m := range []*member{a, b} {
			assert.Positive(t, m.r.Stats().Acked, "each delivers its share")
		}

		c := start("c", another())
		settleUntil(t, shares(a, b, c), "c took its share, handed over by a and b")

		// a dies: nothing of it reaches a server any more.
		a.die()
		a.p.kill()
		_ = a.stop()
		settleUntil(t, shares(b, c), "b and c took a's partitions over")
		second := emitMany(em, "second", 120, 24)
		settleUntil(t, func() bool {
			return pending(t, store) == 0 && b.d.handledAll(second, c.d)
		}, "the second entries delivered by b and c")
		require.NoError(t, b.stop())
		require.NoError(t, c.stop())

		assert.Positive(t, b.r.Stats().TakeOvers+c.r.Stats().TakeOvers, "a's lapsed leases reclaimed")
		for _, m := range []*member{a, b, c} {
			m.d.check()
		}
		for _, id := range first {
			assert.Positive(t, a.d.handled[id]+b.d.handled[id]+c.d.handled[id], id)
		}
		holds.check(t)
		assert.Zero(t, pending(t, store))
	})
}

// handledAll reports whether every entry of ids succeeded in d or in one of others.
func (d *deliveries) handledAll(ids []string, others ...*deliveries) bool {
	for _, id := range ids {
		n := d.handledOf(id)
		for _, o := range others {
			n += o.handledOf(id)
		}
		if n == 0 {
			return false
		}
	}
	return true
}

func (d *deliveries) handledOf(id string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.handled[id]
}
