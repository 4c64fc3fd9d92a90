package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
)

// entryKey names an outbox entry.
type entryKey struct {
	source string
	seq    int64
}

// ackLog is the relay's store as the workload sees it: the variant's relay store, with every
// ack that returned nil recorded, so that a delivery of an entry whose ack had completed is
// told apart (it reappeared). Give relays relayed(), which wakes them as the store it wraps
// does, and is partitioned (and targeted, and excluding) when that store is.
type ackLog struct {
	execstore.Store
	mu    sync.Mutex
	acked map[entryKey]bool
	// relayed is the log as relays get it: the log itself, or the log with the partitioned
	// scans of a partitioned store.
	relayed execstore.Store
}

func newAckLog(s execstore.Store) *ackLog {
	l := &ackLog{Store: s, acked: make(map[entryKey]bool)}
	l.relayed = withScansOf(l, s)
	if sig := wake.Of(s); sig != nil {
		wake.Register(l.relayed, sig)
	}
	return l
}

// release stops the log's wake-ups.
func (l *ackLog) release() { wake.Unregister(l.relayed) }

// withScansOf returns wrapper (a wrapper of s) with s's partitioned scans, targeted reads and
// scans that leave executions out, those s has.
func withScansOf(wrapper, s execstore.Store) execstore.Store {
	p, ok := s.(execstore.Partitioned)
	if !ok {
		return wrapper
	}
	ps := &partitionedStore{Store: wrapper, p: p}
	t, ok := s.(execstore.Targeted)
	if !ok {
		return ps
	}
	ts := &targetedStore{partitionedStore: ps, t: t}
	if e, ok := s.(execstore.Excluding); ok {
		return &excludingStore{targetedStore: ts, e: e}
	}
	return ts
}

// partitionedStore is a wrapper of a partitioned store (Store, which forwards to p what it
// does not change itself) that is partitioned too: its partitioned scans are p's.
type partitionedStore struct {
	execstore.Store
	p execstore.Partitioned
}

func (s *partitionedStore) Partitions() int { return s.p.Partitions() }

func (s *partitionedStore) PendingOutboxIn(ctx context.Context, partitions []int, limit int) ([]execstore.OutboxEntry, error) {
	return s.p.PendingOutboxIn(ctx, partitions, limit)
}

func (s *partitionedStore) PendingSpawnsIn(ctx context.Context, partitions []int, limit int) ([]execstore.SpawnEntry, error) {
	return s.p.PendingSpawnsIn(ctx, partitions, limit)
}

func (s *partitionedStore) DueTimersIn(ctx context.Context, partitions []int, now time.Time, limit int) ([]execstore.DueTimer, error) {
	return s.p.DueTimersIn(ctx, partitions, now, limit)
}

var _ execstore.Partitioned = (*partitionedStore)(nil)

// targetedStore is a partitionedStore whose store is execstore.Targeted too: its targeted
// reads are t's.
type targetedStore struct {
	*partitionedStore
	t execstore.Targeted
}

func (s *targetedStore) PendingOutboxOf(ctx context.Context, ids []string, limit int) ([]execstore.OutboxEntry, error) {
	return s.t.PendingOutboxOf(ctx, ids, limit)
}

func (s *targetedStore) DueTimersOf(ctx context.Context, ids []string, now time.Time, limit int) ([]execstore.DueTimer, error) {
	return s.t.DueTimersOf(ctx, ids, now, limit)
}

var _ execstore.Targeted = (*targetedStore)(nil)

// excludingStore is a targetedStore whose store is execstore.Excluding too: its scans that
// leave executions out are e's.
type excludingStore struct {
	*targetedStore
	e execstore.Excluding
}

func (s *excludingStore) PendingOutboxExcept(ctx context.Context, partitions []int, except []string, limit int) ([]execstore.OutboxEntry, error) {
	return s.e.PendingOutboxExcept(ctx, partitions, except, limit)
}

var _ execstore.Excluding = (*excludingStore)(nil)

func (l *ackLog) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	if err := l.Store.AckOutbox(ctx, sourceID, seq); err != nil {
		return err
	}
	l.mu.Lock()
	l.acked[entryKey{sourceID, seq}] = true
	l.mu.Unlock()
	return nil
}

// wasAcked reports whether an ack of the entry returned nil.
func (l *ackLog) wasAcked(k entryKey) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked[k]
}

// errNotRelayed is what the seed port's relay store answers to the calls a relay and a
// sweeper never make.
var errNotRelayed = errors.New("bench: the seed port's relay store serves the relay and the sweeper only")

// seedRelayStore is the seed port as package relay needs a store: its pending_outbox,
// ack_outbox (the exact entry, as scanned, pulled), due_timers and delete_timer, one call
// after the other as the seed's synchronous design makes them. The other calls of
// execstore.Store are refused.
type seedRelayStore struct {
	s      *seedPort
	serial sync.Mutex // one seed call at a time
	mu     sync.Mutex
	stored map[entryKey]bson.Raw // each pending entry as last scanned, for its ack
}

func newSeedRelayStore(s *seedPort) *seedRelayStore {
	return &seedRelayStore{s: s, stored: make(map[entryKey]bson.Raw)}
}

func (r *seedRelayStore) PendingOutbox(ctx context.Context, limit int) ([]execstore.OutboxEntry, error) {
	r.serial.Lock()
	entries, err := r.s.pendingOutbox(ctx, limit)
	r.serial.Unlock()
	if err != nil {
		return nil, err
	}
	out := make([]execstore.OutboxEntry, len(entries))
	r.mu.Lock()
	for i, e := range entries {
		out[i] = e.OutboxEntry
		r.stored[entryKey{e.SourceID, e.Seq}] = e.stored
	}
	r.mu.Unlock()
	return out, nil
}

func (r *seedRelayStore) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	k := entryKey{sourceID, seq}
	r.mu.Lock()
	stored, ok := r.stored[k]
	r.mu.Unlock()
	if !ok {
		return nil // never scanned here: nothing to pull
	}
	r.serial.Lock()
	err := r.s.ackOutbox(ctx, pendingEntry{OutboxEntry: execstore.OutboxEntry{Seq: seq, SourceID: sourceID}, stored: stored})
	r.serial.Unlock()
	if err == nil {
		r.mu.Lock()
		delete(r.stored, k)
		r.mu.Unlock()
	}
	return err
}

func (r *seedRelayStore) DueTimers(ctx context.Context, now time.Time, limit int) ([]execstore.DueTimer, error) {
	r.serial.Lock()
	defer r.serial.Unlock()
	return r.s.dueTimers(ctx, now, limit)
}

func (r *seedRelayStore) DeleteTimer(ctx context.Context, id, path string, fireAt time.Time) (bool, error) {
	r.serial.Lock()
	defer r.serial.Unlock()
	return r.s.deleteTimer(ctx, execstore.DueTimer{ExecutionID: id, Path: path, FireAt: fireAt})
}

// DeleteTimers is the seed's delete_timer for each timer, one after the other.
func (r *seedRelayStore) DeleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	for _, t := range timers {
		if _, err := r.DeleteTimer(ctx, t.ExecutionID, t.Path, t.FireAt); err != nil {
			return err
		}
	}
	return nil
}

func (r *seedRelayStore) Load(context.Context, string) (*execstore.Execution, error) {
	return nil, errNotRelayed
}
func (r *seedRelayStore) LoadForEvent(context.Context, string, string) (*execstore.Execution, bool, error) {
	return nil, false, errNotRelayed
}
func (r *seedRelayStore) IsProcessed(context.Context, string, string) (bool, error) {
	return false, errNotRelayed
}
func (r *seedRelayStore) Commit(context.Context, *execstore.Execution, execstore.Commit) ([]int64, error) {
	return nil, errNotRelayed
}
func (r *seedRelayStore) Save(context.Context, *execstore.Execution) error { return errNotRelayed }
func (r *seedRelayStore) List(context.Context, execstore.ListQuery) (execstore.Page, error) {
	return execstore.Page{}, errNotRelayed
}
func (r *seedRelayStore) PendingSpawns(context.Context, int) ([]execstore.SpawnEntry, error) {
	return nil, errNotRelayed
}
func (r *seedRelayStore) AckSpawn(context.Context, string, int64) error { return errNotRelayed }
func (r *seedRelayStore) AppendTrace(context.Context, string, map[string]any) error {
	return errNotRelayed
}
func (r *seedRelayStore) ReadTrace(context.Context, string) ([]execstore.TraceStep, error) {
	return nil, errNotRelayed
}
func (r *seedRelayStore) Close(context.Context) error { return nil }

var _ execstore.Store = (*seedRelayStore)(nil)
