package aio

import (
	"github.com/execstore/execstore"
)

// ending is what one commit's settling needs, whichever path sent it: alone (commit.go) or
// in a group commit's bulk write (group_commit.go). Both settle it by settle, so everything
// that learns a commit's outcome learns it in one order:
//
//  1. the removals it carried (acks, a fired timer): done when it won, else left to their
//     own writes;
//  2. whether its caller still waits: a grouped commit's caller may have given up on it,
//     and was answered then (its relays' sinks too);
//  3. the caller's execution and the snapshot cache: the new version when it won and the
//     caller waits; else the cache forgets what it held of the execution;
//  4. the relays, when it won: woken in this process (the signal) and in others (the
//     board);
//  5. the relays' sinks (End), when the caller waits: its items handed over, or a scan owed;
//  6. the caller: its stats and its future, by the request's return (alone) or by answer
//     (grouped).
//
// So a relay that takes the commit's items, handed over or read by the scan its wake-up asks
// for, starts their handlers once the cache holds what the commit wrote: a handler's load of
// the same execution is answered with it. And the caller learns the outcome once the relays
// did, so its next commit of the execution begins after this one ended on their sinks.
type ending struct {
	id       string
	expected int64  // the version the commit was built on
	event    string // its ProcessedEventID
	epoch    uint64 // the snapshot cache's when it was submitted
	carry    *carried
	note     wakeNote
}

// caller is how a commit's caller is told its outcome: waiting reports, once, whether it
// still waits (and takes the outcome from now on); answer tells it.
type caller interface {
	waiting() bool
	answer(seqs []int64, err error)
}

// settle settles e: won (err nil) at version with traceNext, exe being the caller's
// execution, or failed with err. See ending for the order.
func (s *Store) settle(e *ending, c caller, exe *execstore.Execution, version, traceNext int64, seqs []int64, err error) {
	won := err == nil
	if won { // 1
		e.carry.won(s)
	} else {
		e.carry.lost(s, err)
	}
	waits := c.waiting() // 2
	switch {             // 3
	case won && waits:
		exe.Version, exe.TraceNext = version, traceNext
		s.commitWon(exe, e.event, e.epoch)
	case won:
		// The caller reloads; its execution is not touched, and the cache cannot copy it
		// (the caller may be changing it).
		s.commitFailed(e.id, e.expected, "", errCommitAbandoned)
	default:
		s.commitFailed(e.id, e.expected, e.event, err)
	}
	if won { // 4
		e.note.version = version
		if !waits {
			e.note.emits = nil // the caller may be changing them: the board carries nothing
		}
		s.wake(e.note)
	}
	if !waits {
		return
	}
	e.note.end(won) // 5
	c.answer(seqs, err)
}

// alone is the caller of a commit sent alone: it waits, and the request's return answers it.
type alone struct{}

func (alone) waiting() bool         { return true }
func (alone) answer([]int64, error) {}
