package idem

import (
	"errors"
	"sync/atomic"

	"github.com/execstore/execstore/internal/counters"
	"github.com/execstore/execstore/server"
)

type opKind int

const (
	opClaim opKind = iota
	opComplete
	opRelease
	opRenew
	opGet
	opList
	opKinds
)

var opNames = [opKinds]string{"claim", "complete", "release", "renew", "get", "list"}

// outcomes are the claims' outcomes, as Stats.Claims counts them.
var outcomes = [...]Outcome{New, LeaseReclaimed, AlreadyClaimed, AlreadyCompleted}

// Stats is a snapshot of a Store's counters: those every store keeps (server.Stats: queue,
// operations by name — claim, complete, release, renew, get, list — unknown outcomes, shed calls,
// server commands) and the store's own.
type Stats struct {
	server.Stats
	Claims     map[Outcome]int64 // claims by Outcome
	Recovered  int64             // claims that took over an unreadable record
	Settled    int64             // unanswered claims settled by reading their token back
	Mismatches int64             // claims refused for a different fingerprint
	Reaped     int64             // records deleted by the FerretDB sweep
	ReapErrors int64             // sweeps that failed (the next one tries again)
}

type statCounters struct {
	*counters.Ops
	claims                         [len(outcomes)]atomic.Int64
	recovered, settled, mismatches atomic.Int64
	reaped, reapErrors             atomic.Int64
}

func newStatCounters() *statCounters { return &statCounters{Ops: counters.New(opNames[:]...)} }

// Record counts an outcome of an operation of kind (an opKind); see async.Recorder. A claim
// refused for a different fingerprint is an answer, not a failed call.
func (c *statCounters) Record(kind int, err error) {
	if errors.Is(err, ErrFingerprintMismatch) {
		err = nil
	}
	c.Ops.Record(kind, err)
}

func (c *statCounters) recordClaim(cl Claim, err error) {
	if errors.Is(err, ErrFingerprintMismatch) {
		c.mismatches.Add(1)
	}
	for i, o := range outcomes {
		if cl.Outcome == o {
			c.claims[i].Add(1)
		}
	}
	if cl.RecoveredFromCorrupt {
		c.recovered.Add(1)
	}
	if cl.Settled {
		c.settled.Add(1)
	}
}

// Stats returns the store's counters.
func (s *Store) Stats() Stats {
	c := s.stats
	st := Stats{
		Stats:     c.Ops.Stats(s.pool),
		Claims:    make(map[Outcome]int64, len(outcomes)),
		Recovered: c.recovered.Load(), Settled: c.settled.Load(), Mismatches: c.mismatches.Load(),
		Reaped: c.reaped.Load(), ReapErrors: c.reapErrors.Load(),
	}
	for i, o := range outcomes {
		st.Claims[o] = c.claims[i].Load()
	}
	return st
}
