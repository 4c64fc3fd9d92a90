package aio

import (
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/ops"
)

// wakeNote is what a commit tells the relays and sweepers of its database in this process
// (package internal/wake). Once it won: that it wrote outbox entries or spawn intents, and the
// earliest timer it armed (its stored seconds, as package internal/wake compares them). To the
// relays' sinks: its Begin before it is sent, and its End once its outcome is known.
type wakeNote struct {
	id      string // the execution committed to
	version int64  // the version the commit created, once won
	emitted bool
	armed   bool
	fireAt  float64
	flight  *wake.InFlight  // the commit's Begin on the sinks; nil when none is subscribed
	wrote   *wake.Committed // what the commit hands the sinks if it wins; nil without flight
	// What the board may carry to the holder of the execution's outbox (outboxOf): the
	// commit's emits, their seqs and its time. emits is the caller's: read only while the
	// caller waits for the outcome, and cleared before it is answered otherwise.
	emits []execstore.Emit
	seqs  []int64
	at    time.Time
	begun time.Time // when the commit was about to be sent (begin)
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

// begin tells the relays' sinks that the commit of c on exe, with seqs, is about to be sent.
// Only when a sink is subscribed does it work out what the commit writes. Call it before the
// commit can reach the server, then end exactly once.
func (s *Store) begin(n *wakeNote, exe *execstore.Execution, c *execstore.Commit, seqs ops.Seqs) {
	n.id, n.begun = exe.ID, time.Now()
	n.emits, n.seqs, n.at = c.Emits, seqs.Outbox, seqs.At
	if n.flight = s.signal.Begin(exe.ID); n.flight != nil {
		n.wrote = committedOf(exe, c, seqs)
	}
}

// end tells the relays' sinks the commit's outcome: won, it hands them what it wrote. Call it
// before the commit's caller learns the outcome.
func (n wakeNote) end(won bool) {
	if won {
		n.flight.End(n.wrote)
	} else {
		n.flight.End(nil)
	}
}

// committedOf is what the commit of c on exe, with seqs, writes for the relays: as
// PendingOutbox, PendingSpawns and DueTimers read it back. It shares nothing with c.
func committedOf(exe *execstore.Execution, c *execstore.Commit, seqs ops.Seqs) *wake.Committed {
	version := exe.Version + 1
	w := &wake.Committed{ExecutionID: exe.ID, Version: version, Timers: contract.HeldTimerOps(c.Timers),
		Outbox: outboxEntries(exe.ID, version, c.Emits, seqs.Outbox, seqs.At)}
	if len(c.Spawns) > 0 {
		w.Spawns = make([]execstore.SpawnEntry, len(c.Spawns))
		for i, sp := range c.Spawns {
			// Through BSON, as the store writes the context and PendingSpawns decodes it.
			// Neither fails: PrepareCommit encoded the same map.
			b, _ := contract.EncodeMap(sp.Context)
			m, _ := contract.DecodeMap(b)
			w.Spawns[i] = execstore.SpawnEntry{Seq: seqs.Spawns[i], ParentID: exe.ID, ChildID: sp.ChildID,
				RootPath: sp.RootPath, Context: m, CommittedAt: seqs.At}
		}
	}
	return w
}

// outboxEntries are the outbox entries a commit of execution id creating version wrote of
// emits, with seqs, at: as PendingOutbox reads them back, sharing nothing with emits. nil
// for none.
func outboxEntries(id string, version int64, emits []execstore.Emit, seqs []int64, at time.Time) []execstore.OutboxEntry {
	if len(emits) == 0 {
		return nil
	}
	out := make([]execstore.OutboxEntry, len(emits))
	for i, e := range emits {
		out[i] = execstore.OutboxEntry{Seq: seqs[i], SourceID: id, Version: version,
			TargetID: e.TargetID, Event: append([]byte{}, e.Event...), CommittedAt: at}
	}
	return out
}

// outboxOf returns the outbox entries the commit noted n wrote (outboxEntries), when their
// events and targets take at most limit bytes in all; nil when they take more, or it wrote
// none.
func (n wakeNote) outboxOf(limit int) []execstore.OutboxEntry {
	size := 0
	for _, e := range n.emits {
		if size += len(e.Event) + len(e.TargetID); size > limit {
			return nil
		}
	}
	return outboxEntries(n.id, n.version, n.emits, n.seqs, n.at)
}

// registerWake makes the store's commits wake the relays of its namespace: its database and
// executions collection.
func (s *Store) registerWake() {
	if s.env.Executions == nil {
		return // a store built by a test without a server
	}
	s.signal = wake.For("aio:" + s.env.Executions.Database().Name() + "/" + s.env.Executions.Name())
	wake.Register(s, s.signal)
	if s.client != nil && !s.opts.DisableRemoteWakes {
		s.board = newBoard(s)
		wake.RegisterBoard(s, s.board)
	}
}

// wake tells the relays and sweepers what a commit, now visible, wrote for them: those of
// this process through the signal, with no relay waiting an atomic load per kind; those of
// other processes through the board.
func (s *Store) wake(n wakeNote) {
	if s.signal == nil {
		return
	}
	if s.board != nil {
		s.board.note(n)
	}
	if n.emitted {
		s.signal.Emitted()
	}
	if n.armed {
		s.signal.Scheduled(n.fireAt)
	}
}
