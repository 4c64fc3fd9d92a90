package memstore

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/ops"
)

// A commit is checked and copied before the lock is taken (preparedCommit), then guarded and
// applied under it. Nothing can fail once the dedupe and version guards have passed, so a
// commit is applied whole or, when a guard fails, not at all; no reader sees a part of it,
// since the write lock is held throughout.

// preparedCommit is a commit with the caller's input copied and encoded: it shares nothing with
// the caller.
type preparedCommit struct {
	exe       execstore.Execution // Data copied
	emits     []outboxItem        // events copied; version set when applied
	processed string
	timers    []execstore.TimerOp
	spawns    []spawnItem // contexts encoded
	at        time.Time   // when it was applied: its entries' and intents' CommittedAt, its step's time
	step      []byte      // the encoded trace step; nil for none
}

// prepareCommit copies and encodes exe and c, which have passed contract.ValidateCommit.
func prepareCommit(exe *execstore.Execution, c *execstore.Commit) (*preparedCommit, error) {
	pc := &preparedCommit{exe: *exe, processed: c.ProcessedEventID, timers: slices.Clone(c.Timers)}
	pc.exe.Data = cloneBytes(exe.Data)
	pc.emits = make([]outboxItem, len(c.Emits))
	for i, e := range c.Emits {
		pc.emits[i] = outboxItem{targetID: e.TargetID, event: cloneBytes(e.Event)}
	}
	pc.spawns = make([]spawnItem, len(c.Spawns))
	for i, sp := range c.Spawns {
		b, err := contract.EncodeMap(sp.Context)
		if err != nil {
			return nil, contract.Invalid("Commit.Spawns["+strconv.Itoa(i)+"].Context", "%v", err)
		}
		pc.spawns[i] = spawnItem{childID: sp.ChildID, rootPath: sp.RootPath, context: b}
	}
	if c.Trace != nil {
		b, err := contract.EncodeMap(c.Trace)
		if err != nil {
			return nil, contract.Invalid("Commit.Trace", "%v", err)
		}
		pc.step = b
	}
	return pc, nil
}

// Commit atomically writes exe at exe.Version+1 with everything in c (see execstore.Store).
// On success exe.Version is incremented, and exe.TraceNext is set to the execution's next
// trace index. A c.ProcessedEventID already in the dedupe set gets an
// *execstore.AlreadyProcessedError, even when exe.Version is also stale. A stale version
// otherwise gets an *execstore.ConflictError. Either way nothing is written, and exe is left
// as it was.
func (s *Store) Commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) ([]int64, error) {
	if err := contract.ValidateCommit(exe, &c); err != nil {
		return nil, err
	}
	pc, err := prepareCommit(exe, &c)
	if err != nil {
		return nil, err
	}
	contexts := make([][]byte, len(pc.spawns))
	for i, sp := range pc.spawns {
		contexts[i] = sp.context
	}
	// What the MongoDB store could not write, this one refuses too.
	if err := ops.CheckCommitSize(exe, &c, contexts, pc.step); err != nil {
		return nil, err
	}
	flight := s.signal.Begin(exe.ID) // the relays' sinks, told before the commit is applied
	if err := s.lock(ctx); err != nil {
		flight.End(nil)
		return nil, err
	}
	r, err := s.guard(&pc.exe, pc.processed)
	if err != nil {
		s.mu.Unlock()
		flight.End(nil)
		return nil, err
	}
	seqs, firstSpawn := s.apply(r, pc)
	exe.Version, exe.TraceNext = r.exe.Version, r.exe.TraceNext
	s.mu.Unlock()
	s.wake(pc)
	if flight != nil {
		flight.End(pc.committed(r.exe.ID, exe.Version, seqs, firstSpawn))
	}
	return seqs, nil
}

// committed is what pc wrote for the relays, applied at version with the outbox seqs seqs
// and the spawn seqs from firstSpawn on: as PendingOutbox, PendingSpawns and DueTimers return
// it.
func (pc *preparedCommit) committed(id string, version int64, seqs []int64, firstSpawn int64) *wake.Committed {
	c := &wake.Committed{ExecutionID: id, Version: version, Timers: contract.HeldTimerOps(pc.timers)}
	if len(pc.emits) > 0 {
		c.Outbox = make([]execstore.OutboxEntry, len(pc.emits))
		for i, e := range pc.emits {
			c.Outbox[i] = execstore.OutboxEntry{Seq: seqs[i], SourceID: id, Version: version,
				TargetID: e.targetID, Event: cloneBytes(e.event), CommittedAt: pc.at}
		}
	}
	if len(pc.spawns) > 0 {
		c.Spawns = make([]execstore.SpawnEntry, len(pc.spawns))
		for i, sp := range pc.spawns {
			m, _ := contract.DecodeMap(sp.context) // never fails: prepareCommit encoded it
			c.Spawns[i] = execstore.SpawnEntry{Seq: firstSpawn + int64(i), ParentID: id, ChildID: sp.childID,
				RootPath: sp.rootPath, Context: m, CommittedAt: pc.at}
		}
	}
	return c
}

// wake tells the store's relays and sweepers (package internal/wake) what the commit pc,
// now visible, wrote for them: outbox entries or spawn intents, and the earliest timer it
// armed. With no relay waiting it costs an atomic load per kind.
func (s *Store) wake(pc *preparedCommit) {
	if len(pc.emits) > 0 || len(pc.spawns) > 0 {
		s.signal.Emitted()
	}
	earliest, armed := 0.0, false
	for _, op := range pc.timers {
		if at := contract.StoredTime(op.FireAt); !op.Cancel && (!armed || at < earliest) {
			earliest, armed = at, true
		}
	}
	if armed {
		s.signal.Scheduled(earliest)
	}
}

// Save commits exe's snapshot alone.
func (s *Store) Save(ctx context.Context, exe *execstore.Execution) error {
	_, err := s.Commit(ctx, exe, execstore.Commit{})
	return err
}

// guard checks the commit's processed event id (eventID, "" for none) against the dedupe set
// and exe's version against the stored one, and returns the record the commit is to change: a
// new one, not yet in the store, when exe.Version is 0. An event already in the set is refused
// with an *AlreadyProcessedError whatever the version, the create path's included, since a
// reload would not make it worth handling again; the set is read as it stands before the
// commit (both generations, before the commit's own generation is reset), as the MongoDB
// store's filter reads it. The caller holds the lock.
func (s *Store) guard(exe *execstore.Execution, eventID string) (*record, error) {
	r, found := s.execs[exe.ID]
	switch {
	case found && eventID != "" && r.dedupe.holds(eventID):
		return nil, &execstore.AlreadyProcessedError{ExecutionID: exe.ID, EventID: eventID, Version: r.exe.Version}
	case !found && exe.Version == 0:
		// The create starts the trace at the caller's TraceNext, as the MongoDB store's
		// insert does.
		return &record{exe: execstore.Execution{ID: exe.ID, TraceNext: exe.TraceNext}, timers: map[string]float64{},
			timerVersions: map[string]int64{}}, nil
	case !found:
		return nil, &execstore.ConflictError{ExecutionID: exe.ID, Expected: exe.Version, Found: execstore.NoVersion}
	case r.exe.Version != exe.Version:
		return nil, &execstore.ConflictError{ExecutionID: exe.ID, Expected: exe.Version, Found: r.exe.Version}
	}
	return r, nil
}

// apply writes pc to r, which guard returned, and returns the outbox seqs in emit order and
// the seq of the first spawn intent: the others follow it one by one. The caller holds the
// lock.
func (s *Store) apply(r *record, pc *preparedCommit) (seqs []int64, firstSpawn int64) {
	version := r.exe.Version + 1
	traceNext := r.exe.TraceNext
	r.exe = pc.exe
	r.exe.Version, r.exe.TraceNext = version, traceNext
	if version == 1 { // guard made r: the commit creates the execution
		s.insert(r.exe.ID, r)
	}
	pc.at = ops.CommitTime()
	if r.exe.Status.Finished() {
		r.finishedAt = pc.at
	}
	for _, e := range pc.emits {
		e.version, e.at = version, pc.at
		seqs = append(seqs, s.outbox.push(r.exe.ID, e))
	}
	for i, sp := range pc.spawns {
		sp.at = pc.at
		if seq := s.spawns.push(r.exe.ID, sp); i == 0 {
			firstSpawn = seq
		}
	}
	r.dedupe.record(s.dedupeWindow, version, pc.processed)
	for _, op := range pc.timers { // in order: the last op on a path wins
		delete(r.timerFails, op.Path) // a timer armed or cancelled anew starts with no failure
		if op.Cancel {
			delete(r.timers, op.Path)
			delete(r.timerVersions, op.Path)
		} else {
			r.timers[op.Path] = contract.StoredTime(op.FireAt)
			r.timerVersions[op.Path] = version // this arming, even at the fire time it had
		}
	}
	if pc.step != nil {
		s.appendStep(r, pc.step, pc.at)
	}
	return seqs, firstSpawn
}

// cloneBytes returns a copy of b that is never nil, as the MongoDB store returns bytes.
func cloneBytes(b []byte) []byte {
	return append([]byte{}, b...)
}
