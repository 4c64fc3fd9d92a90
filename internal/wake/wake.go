// Package wake is the process-wide wake-up signal of a store namespace: a commit made
// through any store of the process tells the relays and sweepers of the same database, at
// once and with no server command, that it wrote outbox entries or spawn intents (Emitted)
// or armed a timer (Scheduled). A relay of another process learns of the commit only by
// polling; this signal only makes the ones of this process quicker.
//
// A store registers the signal of its namespace (For, then Register) and calls Emitted or
// Scheduled after each commit that wrote something to relay; a relay or sweeper looks the
// signal up by the store it was given (Of) and waits on EmittedC or ScheduledBeforeC.
//
// A relay may also be handed what each commit wrote, with no read at all: it subscribes a
// Sink (Subscribe), and the store brackets every commit with Begin and InFlight.End. End
// carries a Committed when the commit won.
//
// What always holds:
//   - Broadcast: a notification closes the one channel every waiter of that kind holds, so
//     every waiter wakes. A channel is closed at most once, by the first notification after it
//     was handed out; the next call hands out a new one.
//   - No lost wake-up: take the channel, then look at the store, then wait. A notification
//     that finds the waiter's channel closes it; one that does not (it found no waiter, or a
//     round for earlier fire times only) read the signal before the waiter joined, and its
//     commit was visible before that, so the waiter's look sees the commit.
//   - Horizons: a waiter of ScheduledBeforeC(t) needs waking only for timers firing before t
//     (it looks again by t anyway). A round wakes for fire times before the latest horizon
//     of its waiters, so a waiter may wake for a later timer, never miss an earlier one.
//   - A wake-up may be spurious (a commit whose entries another relay took first, a waiter
//     that joined a channel just as it closed): a waiter looks and waits again.
//   - Cost on the commit path: with nobody waiting, Emitted and Scheduled are one atomic load
//     and allocate nothing; with waiters, a compare-and-swap and the close of one channel.
//     Waiting costs one channel per round of wake-ups, shared by all waiters.
//   - Hand-off order: Begin comes before the commit's write can reach the server. End comes
//     once its outcome is known, and before the committer learns it, so a committer's next
//     commit of the same execution begins after the previous one ended.
//   - Every Begin gets exactly one End, on every sink that saw the Begin, even one that has
//     unsubscribed since. End carries a Committed only for a commit that won and is visible
//     to readers; a lost, refused or failed commit, and one whose outcome is unknown, ends
//     with nil.
//   - Cost of the hand-off: with no sink subscribed, Begin is one atomic load and returns
//     nil, End on nil does nothing, and neither allocates.
//   - Signals live as long as something holds them: a registered store, a relay. For returns
//     the same signal for a key for as long as one is held, so every store and relay of a
//     namespace meets on one; a signal no one holds is dropped, and For makes a new one.
package wake

import (
	"math"
	"reflect"
	"runtime"
	"sync"
	"sync/atomic"
	"weak"
)

// Signal is the wake-up signal of one namespace. Its zero value is ready to use, but a store
// and its relays meet only on the signal For returns. Every method is safe for concurrent
// use.
type Signal struct {
	emitted   atomic.Pointer[waiters]
	scheduled atomic.Pointer[waiters]
	// sinks are the subscribed sinks, never changed in place; nil when there are none.
	sinks       atomic.Pointer[[]*subscription]
	subscribing sync.Mutex // serialises the changes to sinks
}

// waiters is one round of waiters of one kind: the channel they share, closed by the
// notification that ends the round.
type waiters struct {
	c chan struct{}
	// before holds the float64 bits of the latest fire time any waiter of the round still
	// cares about: a Scheduled(fireAt) ends the round only when fireAt < before. It only
	// grows. Emitted's rounds keep +Inf.
	before atomic.Uint64
}

// Emitted reports that a commit wrote outbox entries or spawn intents: it wakes every waiter
// of EmittedC. Call it after the commit is visible to readers.
func (s *Signal) Emitted() { notify(&s.emitted, math.Inf(-1)) }

// Scheduled reports that a commit armed a timer firing at fireAt (as the store holds it:
// contract.StoredTime, seconds since the Unix epoch; for a commit arming several, the earliest): it wakes every waiter of ScheduledC,
// and of ScheduledBeforeC(t) when fireAt < t. Call it after the commit is visible to readers.
func (s *Signal) Scheduled(fireAt float64) { notify(&s.scheduled, fireAt) }

// EmittedC returns a channel closed at the next Emitted after the call.
func (s *Signal) EmittedC() <-chan struct{} { return wait(&s.emitted, math.Inf(1)) }

// ScheduledC returns a channel closed at the next Scheduled after the call, whatever its
// fire time.
func (s *Signal) ScheduledC() <-chan struct{} { return wait(&s.scheduled, math.Inf(1)) }

// ScheduledBeforeC returns a channel closed at the next Scheduled(fireAt) after the call
// with fireAt < t: a sweeper that will look at the store again by t anyway needs no wake-up
// for a timer that fires later. The channel is shared with every other waiter of
// ScheduledC and ScheduledBeforeC, so it may also close for a later fire time.
func (s *Signal) ScheduledBeforeC(t float64) <-chan struct{} { return wait(&s.scheduled, t) }

// notify ends p's round if it has one whose waiters care about fireAt.
func notify(p *atomic.Pointer[waiters], fireAt float64) {
	for {
		w := p.Load()
		if w == nil || !(fireAt < math.Float64frombits(w.before.Load())) {
			return
		}
		if p.CompareAndSwap(w, nil) {
			close(w.c)
			return
		}
		// Another notification ended the round, or it ended and a new one began: look
		// again, so that a round begun meanwhile is not left waiting for this commit.
	}
}

// wait joins p's round, starting one when there is none, for fire times before t.
func wait(p *atomic.Pointer[waiters], t float64) <-chan struct{} {
	for {
		if w := p.Load(); w != nil {
			w.raise(t)
			return w.c
		}
		w := &waiters{c: make(chan struct{})}
		w.before.Store(math.Float64bits(t))
		if p.CompareAndSwap(nil, w) {
			return w.c
		}
	}
}

// raise makes the round care about fire times before t too.
func (w *waiters) raise(t float64) {
	for {
		old := w.before.Load()
		if !(t > math.Float64frombits(old)) || w.before.CompareAndSwap(old, math.Float64bits(t)) {
			return
		}
	}
}

// registry holds the signals by namespace key, weakly, and the stores' registrations,
// strongly.
var registry = struct {
	mu      sync.Mutex
	signals map[string]weak.Pointer[Signal]
	stores  map[any]*Signal
}{signals: map[string]weak.Pointer[Signal]{}, stores: map[any]*Signal{}}

// For returns the process-wide signal of a namespace key (e.g. "aio:<database>/<collection>"),
// creating it on first use. It returns the same signal for as long as anything holds it.
func For(key string) *Signal {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if s := registry.signals[key].Value(); s != nil {
		return s
	}
	s := &Signal{}
	registry.signals[key] = weak.Make(s)
	runtime.AddCleanup(s, drop, key)
	return s
}

// drop forgets key once its signal is gone, unless For has made a new one since.
func drop(key string) {
	registry.mu.Lock()
	defer registry.mu.Unlock()
	if w, ok := registry.signals[key]; ok && w.Value() == nil {
		delete(registry.signals, key)
	}
}

// Register makes s the signal store's commits notify, for Of to find: relay.New looks the
// signal up by the store it is given. store must be comparable (a pointer); a nil s is
// Unregister.
func Register(store any, s *Signal) {
	if s == nil {
		Unregister(store)
		return
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	registry.stores[store] = s
}

// Unregister forgets store's signal; a store calls it when it closes. Unknown stores are a
// no-op.
func Unregister(store any) {
	if store == nil || !reflect.ValueOf(store).Comparable() {
		return
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	delete(registry.stores, store)
}

// Of returns the signal store registered, or nil when it registered none (then its relays
// only poll): always for a store that is not comparable, which cannot have registered.
func Of(store any) *Signal {
	if store == nil || !reflect.ValueOf(store).Comparable() {
		return nil
	}
	registry.mu.Lock()
	defer registry.mu.Unlock()
	return registry.stores[store]
}
