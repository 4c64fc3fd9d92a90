package idem

import (
	"errors"
	"sync/atomic"

	"github.com/execstore/execstore"
)

type opKind int

const (
	opClaim opKind = iota
	opComplete
	opRelease
	opRenew
	opGet
	opKinds
)

var opNames = [opKinds]string{"claim", "complete", "release", "renew", "get"}

// Stats is a snapshot of a Store's counters.
type Stats struct {
	Queued         int                // requests waiting for a worker
	InFlight       int                // operations running
	Ops            map[string]OpStats // by operation: claim, complete, release, renew, get
	Claims         map[string]int64   // claims by Outcome ("new", "lease reclaimed", …)
	Recovered      int64              // claims that took over an unreadable record
	Settled        int64              // unanswered claims settled by reading their token back
	Mismatches     int64              // claims refused for a different fingerprint
	OutcomeUnknown int64              // writes whose outcome is unknown
	Overloaded     int64              // calls refused by ShedLoad
	Reaped         int64              // records deleted by the FerretDB sweep
	ReapErrors     int64              // sweeps that failed (the next one tries again)
	ServerCommands int64              // commands sent (clients made by Open only)
}

// OpStats counts one kind of operation.
type OpStats struct {
	Calls  int64 // completed calls, failed ones included
	Errors int64 // calls that returned an error
}

type statCounters struct {
	calls, errs                             [opKinds]atomic.Int64
	claims                                  [AlreadyCompleted + 1]atomic.Int64
	recovered, settled, mismatches          atomic.Int64
	unknown, overloaded, reaped, reapErrors atomic.Int64
	cmds                                    atomic.Int64
}

// Record counts an outcome of an operation of kind (an opKind); see async.Recorder.
func (c *statCounters) Record(kind int, err error) {
	c.calls[kind].Add(1)
	if err == nil || errors.Is(err, ErrFingerprintMismatch) {
		return
	}
	c.errs[kind].Add(1)
	switch {
	case errors.Is(err, execstore.ErrOutcomeUnknown):
		c.unknown.Add(1)
	case errors.Is(err, execstore.ErrOverloaded):
		c.overloaded.Add(1)
	}
}

func (c *statCounters) recordClaim(cl Claim, err error) {
	if errors.Is(err, ErrFingerprintMismatch) {
		c.mismatches.Add(1)
	}
	if cl.Outcome != 0 {
		c.claims[cl.Outcome].Add(1)
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
		Queued: s.pool.Len(), InFlight: s.pool.InFlight(),
		Ops: make(map[string]OpStats, opKinds), Claims: map[string]int64{},
		Recovered: c.recovered.Load(), Settled: c.settled.Load(), Mismatches: c.mismatches.Load(),
		OutcomeUnknown: c.unknown.Load(), Overloaded: c.overloaded.Load(),
		Reaped: c.reaped.Load(), ReapErrors: c.reapErrors.Load(), ServerCommands: c.cmds.Load(),
	}
	for k := range opKinds {
		st.Ops[opNames[k]] = OpStats{Calls: c.calls[k].Load(), Errors: c.errs[k].Load()}
	}
	for o := New; o <= AlreadyCompleted; o++ {
		st.Claims[o.String()] = c.claims[o].Load()
	}
	return st
}
