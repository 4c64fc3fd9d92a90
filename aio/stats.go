package aio

import (
	"errors"
	"sync/atomic"

	"github.com/execstore/execstore"
)

type opKind int

const (
	opLoad opKind = iota
	opLoadForEvent
	opIsProcessed
	opCommit
	opList
	opPendingOutbox
	opAckOutbox
	opPendingSpawns
	opAckSpawn
	opDueTimers
	opDeleteTimer
	opAppendTrace
	opReadTrace
	opKinds
)

var opNames = [opKinds]string{
	"load", "load_for_event", "is_processed", "commit", "list", "pending_outbox", "ack_outbox",
	"pending_spawns", "ack_spawn", "due_timers", "delete_timer", "append_trace", "read_trace",
}

// Stats is a snapshot of a Store's counters.
type Stats struct {
	Queued    int                // requests waiting in the channel
	InFlight  int                // operations running
	Ops       map[string]OpStats // by operation name ("commit", "load", …)
	Conflicts int64              // commits refused by the version guard
	// AlreadyProcessed counts commits refused by the dedupe guard (ErrAlreadyProcessed).
	AlreadyProcessed int64
	OutcomeUnknown   int64 // writes whose outcome is unknown
	Overloaded       int64 // non-blocking submits refused
	ServerCommands   int64 // commands sent to the server (clients opened by Open only)
	SeqBlocks        int64 // seq blocks reserved
	GroupCommits     int64 // bulk writes issued by group commit
	GroupedCommits   int64 // commits written by those bulk writes
	// CacheHits counts the LoadForEvent calls the snapshot cache answered with no server
	// command; CacheMisses those it could not, which went to the server. Both are 0 with the
	// cache off.
	CacheHits, CacheMisses int64
	// CoalescedBatches counts the commands that served coalesced acks and loads;
	// CoalescedOps the acks and loads they served.
	CoalescedBatches int64
	CoalescedOps     int64
}

// OpStats counts one kind of operation.
type OpStats struct {
	Calls  int64 // completed calls, failed ones included
	Errors int64 // calls that returned an error
}

// statCounters are the counters behind Stats.
type statCounters struct {
	calls, errs                          [opKinds]atomic.Int64
	conflicts, unknown, overloaded, cmds atomic.Int64
	alreadyProcessed                     atomic.Int64
	groupCommits, groupedCommits         atomic.Int64
	coalesced, coalescedOps              atomic.Int64
}

// Record counts an outcome of an operation of kind (an opKind); see async.Recorder.
func (c *statCounters) Record(kind int, err error) { c.record(opKind(kind), err) }

func (c *statCounters) record(k opKind, err error) {
	c.calls[k].Add(1)
	if err == nil {
		return
	}
	c.errs[k].Add(1)
	switch {
	case errors.Is(err, execstore.ErrConflict):
		c.conflicts.Add(1)
	case errors.Is(err, execstore.ErrAlreadyProcessed):
		c.alreadyProcessed.Add(1)
	case errors.Is(err, execstore.ErrOutcomeUnknown):
		c.unknown.Add(1)
	case errors.Is(err, execstore.ErrOverloaded):
		c.overloaded.Add(1)
	}
}

// Stats returns the store's statCounters.
func (s *Store) Stats() Stats {
	st := Stats{
		Queued:           s.pool.Len(),
		InFlight:         s.pool.InFlight(),
		Ops:              make(map[string]OpStats, opKinds),
		Conflicts:        s.stats.conflicts.Load(),
		AlreadyProcessed: s.stats.alreadyProcessed.Load(),
		OutcomeUnknown:   s.stats.unknown.Load(),
		Overloaded:       s.stats.overloaded.Load(),
		ServerCommands:   s.stats.cmds.Load(),
		SeqBlocks:        s.outboxSeq.Reserved() + s.spawnSeq.Reserved(),
		GroupCommits:     s.stats.groupCommits.Load(),
		GroupedCommits:   s.stats.groupedCommits.Load(),
		CoalescedBatches: s.stats.coalesced.Load(),
		CoalescedOps:     s.stats.coalescedOps.Load(),
	}
	if s.cache != nil {
		st.CacheHits, st.CacheMisses = s.cache.hits.Load(), s.cache.misses.Load()
	}
	for k := range opKinds {
		st.Ops[opNames[k]] = OpStats{Calls: s.stats.calls[k].Load(), Errors: s.stats.errs[k].Load()}
	}
	return st
}
