package aio

import (
	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/wake"
)

// wakeNote is what a won commit tells the relays and sweepers of its database in this
// process (package internal/wake): that it wrote outbox entries or spawn intents, and the
// earliest timer it armed (its stored seconds, as package internal/wake compares them).
type wakeNote struct {
	emitted bool
	armed   bool
	fireAt  float64
}

// noteOf returns the wake-up note of commit c.
func noteOf(c *execstore.Commit) wakeNote {
	n := wakeNote{emitted: len(c.Emits) > 0 || len(c.Spawns) > 0}
	for _, t := range c.Timers {
		if at := contract.StoredTime(t.FireAt); !t.Cancel && (!n.armed || at < n.fireAt) {
			n.armed, n.fireAt = true, at
		}
	}
	return n
}

// registerWake makes the store's commits wake the relays of its namespace: its database and
// executions collection.
func (s *Store) registerWake() {
	if s.env.Executions == nil {
		return // a store built by a test without a server
	}
	s.signal = wake.For("aio:" + s.env.Executions.Database().Name() + "/" + s.env.Executions.Name())
	wake.Register(s, s.signal)
}

// wake tells the relays and sweepers what a commit, now visible, wrote for them. With no
// relay waiting it costs an atomic load per kind.
func (s *Store) wake(n wakeNote) {
	if s.signal == nil {
		return
	}
	if n.emitted {
		s.signal.Emitted()
	}
	if n.armed {
		s.signal.Scheduled(n.fireAt)
	}
}
