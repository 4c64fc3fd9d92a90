package wake

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// closed reports whether c is closed, without waiting.
func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Each notification wakes the waiters of its own kind that joined before it, all of them,
// and none that join after it.
func TestNotifications(t *testing.T) {
	inf := math.Inf(1)
	for _, c := range []struct {
		name   string
		wait   func(s *Signal) <-chan struct{}
		notify func(s *Signal)
		wakes  bool
	}{
		{"Emitted wakes EmittedC", (*Signal).EmittedC, (*Signal).Emitted, true},
		{"Scheduled does not wake EmittedC", (*Signal).EmittedC, func(s *Signal) { s.Scheduled(1) }, false},
		{"Emitted does not wake ScheduledC", (*Signal).ScheduledC, (*Signal).Emitted, false},
		{"Scheduled wakes ScheduledC", (*Signal).ScheduledC, func(s *Signal) { s.Scheduled(1e12) }, true},
		{"earlier fire time wakes", func(s *Signal) <-chan struct{} { return s.ScheduledBeforeC(100) },
			func(s *Signal) { s.Scheduled(99.5) }, true},
		{"same fire time does not wake", func(s *Signal) <-chan struct{} { return s.ScheduledBeforeC(100) },
			func(s *Signal) { s.Scheduled(100) }, false},
		{"later fire time does not wake", func(s *Signal) <-chan struct{} { return s.ScheduledBeforeC(100) },
			func(s *Signal) { s.Scheduled(200) }, false},
		{"ScheduledBeforeC(+Inf) is ScheduledC", func(s *Signal) <-chan struct{} { return s.ScheduledBeforeC(inf) },
			func(s *Signal) { s.Scheduled(math.MaxFloat64) }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Signal{}
			waiters := make([]<-chan struct{}, 5)
			for i := range waiters {
				waiters[i] = c.wait(s)
			}
			c.notify(s)
			for i, w := range waiters {
				assert.Equal(t, c.wakes, closed(w), "waiter %d", i)
			}
			if c.wakes {
				assert.False(t, closed(c.wait(s)), "a waiter that joins after the notification waits for the next")
			}
		})
	}
}

// A notification with nobody waiting is lost to no one: the next waiter waits for the next
// notification.
func TestNotificationWithoutWaiters(t *testing.T) {
	s := &Signal{}
	s.Emitted()
	s.Scheduled(1)
	e, sc := s.EmittedC(), s.ScheduledC()
	assert.False(t, closed(e))
	assert.False(t, closed(sc))
	s.Emitted()
	s.Scheduled(1)
	assert.True(t, closed(e))
	assert.True(t, closed(sc))
}

// Waiters of one round with different horizons share a channel that closes for a fire time
// before the latest horizon: a spurious wake-up for the others, never a missed one.
func TestScheduledHorizons(t *testing.T) {
	s := &Signal{}
	near := s.ScheduledBeforeC(10)
	far := s.ScheduledBeforeC(100)
	s.Scheduled(100)
	assert.False(t, closed(near))
	s.Scheduled(50)
	assert.True(t, closed(near), "shared with the far waiter's round")
	assert.True(t, closed(far))

	// The horizon is a round's: the next round starts from its first waiter's.
	next := s.ScheduledBeforeC(10)
	s.Scheduled(50)
	assert.False(t, closed(next))
	s.Scheduled(9)
	assert.True(t, closed(next))
}

// No wake-up is lost under concurrency: a waiter that takes the channel, then reads what the
// notifiers published, then waits, always wakes for what they publish after its read. Run
// with -race.
func TestNoLostWakeUp(t *testing.T) {
	for _, kind := range []string{"emitted", "scheduled"} {
		t.Run(kind, func(t *testing.T) {
			s := &Signal{}
			var published atomic.Int64
			const notifiers, each, waiters = 4, 2000, 4
			total := int64(notifiers * each)
			var wg sync.WaitGroup
			for range waiters {
				wg.Go(func() {
					seen := int64(0)
					for seen < total {
						var c <-chan struct{}
						if kind == "emitted" {
							c = s.EmittedC()
						} else {
							c = s.ScheduledBeforeC(float64(total))
						}
						if n := published.Load(); n > seen {
							seen = n
							continue
						}
						select {
						case <-c:
						case <-time.After(10 * time.Second):
							t.Errorf("a waiter saw %d of %d and was never woken", seen, total)
							return
						}
					}
				})
			}
			for range notifiers {
				wg.Go(func() {
					for range each {
						n := published.Add(1)
						if kind == "emitted" {
							s.Emitted()
						} else {
							s.Scheduled(float64(n - 1))
						}
					}
				})
			}
			wg.Wait()
		})
	}
}

// For returns one signal per key; Register, Of and Unregister keep a store's.
func TestRegistry(t *testing.T) {
	a, b := For("test:a"), For("test:b")
	require.NotNil(t, a)
	assert.Same(t, a, For("test:a"))
	assert.NotSame(t, a, b)

	store1, store2 := new(int), new(int)
	assert.Nil(t, Of(store1))
	Register(store1, a)
	Register(store2, a)
	assert.Same(t, a, Of(store1))
	assert.Same(t, a, Of(store2))
	Unregister(store1)
	assert.Nil(t, Of(store1))
	assert.Same(t, a, Of(store2))
	Register(store2, nil)
	assert.Nil(t, Of(store2))
	Unregister(store2) // again: a no-op
	runtime.KeepAlive(b)

	// A store that is not comparable has registered nothing, and asking is no panic.
	notComparable := []int{1}
	type wrapped struct{ inner any }
	assert.Nil(t, Of(notComparable))
	assert.Nil(t, Of(wrapped{inner: notComparable}))
	assert.Nil(t, Of(nil))
	Unregister(notComparable)
}

// A signal no one holds is dropped from the registry; one that is held never is.
func TestRegistryDropsUnheldSignals(t *testing.T) {
	held := For("test:held")
	store := new(int)
	Register(store, For("test:registered"))
	func() { _ = For("test:dropped") }()
	require.Eventually(t, func() bool {
		runtime.GC()
		registry.mu.Lock()
		defer registry.mu.Unlock()
		_, ok := registry.signals["test:dropped"]
		return !ok
	}, 10*time.Second, 10*time.Millisecond)
	assert.Same(t, held, For("test:held"))
	assert.Same(t, Of(store), For("test:registered"), "a registered store holds its signal")
	Unregister(store)
	runtime.KeepAlive(held)
}

// Emitted and Scheduled with nobody waiting, and Scheduled past every waiter's horizon,
// allocate nothing.
func TestHotPathAllocatesNothing(t *testing.T) {
	s := &Signal{}
	assert.Zero(t, testing.AllocsPerRun(1000, s.Emitted))
	assert.Zero(t, testing.AllocsPerRun(1000, func() { s.Scheduled(5) }))
	_ = s.ScheduledBeforeC(1)
	assert.Zero(t, testing.AllocsPerRun(1000, func() { s.Scheduled(5) }))
}

func BenchmarkEmittedNoWaiter(b *testing.B) {
	s := For("bench")
	b.ReportAllocs()
	for b.Loop() {
		s.Emitted()
	}
}

func BenchmarkScheduledNoWaiter(b *testing.B) {
	s := For("bench")
	b.ReportAllocs()
	for b.Loop() {
		s.Scheduled(1e9)
	}
}

// BenchmarkScheduledPastHorizon: a sweeper waits until it looks again; timers armed later
// than that do not wake it.
func BenchmarkScheduledPastHorizon(b *testing.B) {
	s := &Signal{}
	_ = s.ScheduledBeforeC(100)
	b.ReportAllocs()
	for b.Loop() {
		s.Scheduled(1e9)
	}
}

// BenchmarkEmittedParallel: the commit path of many goroutines, nobody waiting.
func BenchmarkEmittedParallel(b *testing.B) {
	s := &Signal{}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s.Emitted()
		}
	})
}

// BenchmarkWakeRound: one waiter joins, one notification wakes it.
func BenchmarkWakeRound(b *testing.B) {
	for _, waiters := range []int{1, 8} {
		b.Run(fmt.Sprintf("waiters=%d", waiters), func(b *testing.B) {
			s := &Signal{}
			b.ReportAllocs()
			for b.Loop() {
				var c <-chan struct{}
				for range waiters {
					c = s.EmittedC()
				}
				s.Emitted()
				<-c
			}
		})
	}
}
