package wake

import (
	"sync"

	"github.com/execstore/execstore"
)

// Committed is what one won commit through a store of this process wrote for the relays.
// Every sink that is handed a Committed shares it with the others: none may change it.
type Committed struct {
	ExecutionID string
	Version     int64                   // the version the commit created (1: it created the execution)
	Outbox      []execstore.OutboxEntry // in emit order, every field set as PendingOutbox returns it
	Spawns      []execstore.SpawnEntry  // in commit order, as PendingSpawns returns them
	// Timers are the commit's timer operations, in commit order. A schedule's FireAt is the
	// fire time as DueTimers returns it: as the store holds it, in UTC, with no monotonic
	// clock reading. A cancel's FireAt is the zero time.Time.
	Timers []execstore.TimerOp
}

// Sink is a relay's end of the hand-off. Its methods run on the commit path of whichever
// goroutine commits: they must be quick, safe for concurrent use, and must not call the store.
type Sink interface {
	// Begin is called before a commit of execution id is sent to the server. Its result is
	// given back to End.
	Begin(id string) any
	// End is called once the commit's outcome is known, and before the committer learns it.
	// c is what the commit wrote when it won; nil when it failed or its outcome is unknown.
	End(id string, begun any, c *Committed)
}

// subscription is one Subscribe: a sink may subscribe more than once, each its own.
type subscription struct{ sink Sink }

// sinkCall is one sink's part of a commit in flight: what its Begin returned.
type sinkCall struct {
	sink  Sink
	begun any
}

// InFlight is a commit that Begin told the sinks of, until its End.
type InFlight struct {
	id    string
	calls []sinkCall
	ended sync.Once
}

// Subscribe makes k see the Begin and End of every commit through a store registered on s
// that begins after Subscribe returns. It returns the function that ends the subscription.
// A commit that began before then still gets its End. Calling the function again does
// nothing.
func (s *Signal) Subscribe(k Sink) (unsubscribe func()) {
	if k == nil {
		panic("wake: Subscribe of a nil Sink")
	}
	sub := &subscription{sink: k}
	s.updateSinks(func(subs []*subscription) []*subscription { return append(subs, sub) })
	var once sync.Once
	return func() {
		once.Do(func() {
			s.updateSinks(func(subs []*subscription) []*subscription {
				for i, other := range subs {
					if other == sub {
						return append(subs[:i], subs[i+1:]...)
					}
				}
				return subs
			})
		})
	}
}

// updateSinks replaces the sinks with change applied to a copy of them. Begin reads them
// without a lock, so they are never changed in place.
func (s *Signal) updateSinks(change func([]*subscription) []*subscription) {
	s.subscribing.Lock()
	defer s.subscribing.Unlock()
	var subs []*subscription
	if old := s.sinks.Load(); old != nil {
		subs = append(subs, *old...)
	}
	if subs = change(subs); len(subs) == 0 {
		s.sinks.Store(nil)
		return
	}
	s.sinks.Store(&subs)
}

// Begin tells the sinks a commit of execution id is about to be sent. It returns nil, at the
// cost of one atomic load, when no sink is subscribed (or s is nil).
func (s *Signal) Begin(id string) *InFlight {
	if s == nil {
		return nil
	}
	subs := s.sinks.Load()
	if subs == nil {
		return nil
	}
	f := &InFlight{id: id, calls: make([]sinkCall, len(*subs))}
	for i, sub := range *subs {
		f.calls[i] = sinkCall{sink: sub.sink, begun: sub.sink.Begin(id)}
	}
	return f
}

// End reports the outcome of the commit f began (nil-safe: a nil f does nothing). It calls
// End of each sink that saw the Begin, exactly once: a second End does nothing.
func (f *InFlight) End(c *Committed) {
	if f == nil {
		return
	}
	f.ended.Do(func() {
		for _, k := range f.calls {
			k.sink.End(f.id, k.begun, c)
		}
	})
}
