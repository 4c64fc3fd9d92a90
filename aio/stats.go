package aio

import (
	"context"
	"errors"
	"sync/atomic"

	"go.opentelemetry.io/otel/metric"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/counters"
	"github.com/execstore/execstore/server"
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
	opRestoreTimer
	opAppendTrace
	opReadTrace
	opFail
	opListDead
	opRevive
	opDiscard
	opBacklog
	opExpired
	opDeleteExpired
	opRetentionTotals
	opWake // the board's reads and writes (board.go)
	opRates
	opKinds
)

var opNames = [opKinds]string{
	"load", "load_for_event", "is_processed", "commit", "list", "pending_outbox", "ack_outbox",
	"pending_spawns", "ack_spawn", "due_timers", "delete_timer", "restore_timer", "append_trace", "read_trace",
	"fail", "list_dead", "revive", "discard", "backlog", "expired", "delete_expired", "retention_totals", "wake", "rates",
}

// Stats is a snapshot of a Store's counters. It holds those every store keeps (server.Stats:
// the queue, operations by name such as "commit" and "load", unknown outcomes, shed calls,
// server commands) and the store's own.
type Stats struct {
	server.Stats
	Conflicts int64 // commits refused by the version guard
	// AlreadyProcessed counts commits refused by the dedupe guard (ErrAlreadyProcessed).
	AlreadyProcessed int64
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
	// AcksCarried counts the AckOutbox calls whose entry a commit of its source removed in
	// its own write (Options.AckWait); the others were written alone.
	AcksCarried int64
	// TimersCarried counts the fired timers a commit made by their handler removed in its own
	// write (see the package doc); the sweeper deleted the others.
	TimersCarried int64
	// Hedged counts the commands of a wake-up (the board's writes of marks, a relay's reads
	// of its marks and its targeted reads) sent a second time because the first had not
	// answered within four times their median latency (at least 25ms, 100ms for a write of
	// marks); the first answer was taken.
	Hedged int64
}

// statCounters are the counters behind Stats: the module's (counters.Ops) and the store's
// own.
type statCounters struct {
	*counters.Ops
	conflicts, alreadyProcessed  atomic.Int64
	seqBlocks                    atomic.Int64
	groupCommits, groupedCommits atomic.Int64
	coalesced, coalescedOps      atomic.Int64
	acksCarried, timersCarried   atomic.Int64
}

func newStatCounters() *statCounters { return &statCounters{Ops: counters.New(opNames[:]...)} }

// Record counts an outcome of an operation of kind (an opKind); see async.Recorder.
func (c *statCounters) Record(kind int, err error) { c.record(opKind(kind), err) }

func (c *statCounters) record(k opKind, err error) {
	c.Ops.Record(int(k), err)
	switch {
	case err == nil:
	case errors.Is(err, execstore.ErrConflict):
		c.conflicts.Add(1)
	case errors.Is(err, execstore.ErrAlreadyProcessed):
		c.alreadyProcessed.Add(1)
	}
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	st := Stats{
		Stats:            s.stats.Ops.Stats(s.pool),
		Conflicts:        s.stats.conflicts.Load(),
		AlreadyProcessed: s.stats.alreadyProcessed.Load(),
		SeqBlocks:        s.stats.seqBlocks.Load(),
		GroupCommits:     s.stats.groupCommits.Load(),
		GroupedCommits:   s.stats.groupedCommits.Load(),
		CoalescedBatches: s.stats.coalesced.Load(),
		CoalescedOps:     s.stats.coalescedOps.Load(),
		AcksCarried:      s.stats.acksCarried.Load(),
		TimersCarried:    s.stats.timersCarried.Load(),
		Hedged:           s.wakeCalls.hedged(),
	}
	if s.cache != nil {
		st.CacheHits, st.CacheMisses = s.cache.hits.Load(), s.cache.misses.Load()
	}
	return st
}

// observeCache reports the snapshot cache's hits and misses as OpenTelemetry counters
// (execstore.cache.hits, execstore.cache.misses), when the store has a cache and telemetry.
func (s *Store) observeCache() {
	m := s.tel.Meter()
	if m == nil || s.cache == nil {
		return
	}
	for name, n := range map[string]*atomic.Int64{"execstore.cache.hits": &s.cache.hits, "execstore.cache.misses": &s.cache.misses} {
		_, _ = m.Int64ObservableCounter(name, metric.WithDescription("LoadForEvent calls the snapshot cache answered (hits) or sent to the server (misses)."),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(n.Load())
				return nil
			}))
	}
}
