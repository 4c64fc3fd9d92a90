package memstore

import (
	"context"
	"sort"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// relayQueue holds the pending entries of one relayed kind (the outbox, or the spawn intents)
// of the whole store, in seq order. Seqs come from the queue's one counter, taken under the
// store's write lock by the commit that writes the entry, so they are unique, increase with
// every commit, and each source's entries are in commit order: the oldest-seq-first order is
// also the MongoDB store's relay order, with no reordering to do. A commit that loses its
// version guard takes no seq.
type relayQueue[T any] struct {
	last    int64       // the last seq handed out; the first is 1
	entries []queued[T] // increasing seq
}

// queued is one pending entry.
type queued[T any] struct {
	seq      int64
	source   string // the execution whose commit wrote it
	item     T
	attempts execstore.Attempts // its failed deliveries recorded (dead.go)
}

// push appends item, written by a commit of source, and returns its seq.
func (q *relayQueue[T]) push(source string, item T) int64 {
	q.last++
	q.entries = append(q.entries, queued[T]{seq: q.last, source: source, item: item})
	return q.last
}

// ack removes entry seq if source wrote it; anything else is a no-op.
func (q *relayQueue[T]) ack(source string, seq int64) {
	i := sort.Search(len(q.entries), func(i int) bool { return q.entries[i].seq >= seq })
	if i < len(q.entries) && q.entries[i].seq == seq && q.entries[i].source == source {
		q.entries = append(q.entries[:i], q.entries[i+1:]...)
	}
}

// pending returns up to limit entries (0: all), oldest seq first. The result shares the queue's
// array: read it under the lock.
func (q *relayQueue[T]) pending(limit int) []queued[T] {
	if limit > 0 && limit < len(q.entries) {
		return q.entries[:limit]
	}
	return q.entries
}

// outboxItem is one outbox entry as kept.
type outboxItem struct {
	version  int64     // the version its commit created
	at       time.Time // when its commit was made (OutboxEntry.CommittedAt)
	targetID string
	event    []byte
}

// spawnItem is one spawn intent as kept.
type spawnItem struct {
	childID, rootPath string
	context           []byte    // encoded BSON
	at                time.Time // when its commit was made (SpawnEntry.CommittedAt)
}

// PendingOutbox returns up to limit undelivered outbox entries (0: all), oldest seq first.
func (s *Store) PendingOutbox(ctx context.Context, limit int) ([]execstore.OutboxEntry, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	entries := s.outbox.pending(limit)
	out := make([]execstore.OutboxEntry, len(entries))
	for i, e := range entries {
		out[i] = execstore.OutboxEntry{Seq: e.seq, SourceID: e.source, Version: e.item.version,
			TargetID: e.item.targetID, Event: cloneBytes(e.item.event), CommittedAt: e.item.at, Attempts: e.attempts}
	}
	return out, nil
}

// AckOutbox removes exactly outbox entry seq of sourceID. Acking twice, or acking an unknown
// seq, is a no-op.
func (s *Store) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	if err := contract.ValidateID("sourceID", sourceID); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.outbox.ack(sourceID, seq)
	return nil
}

// PendingSpawns returns up to limit pending spawn intents (0: all), oldest seq first. Each
// context is decoded afresh, so the caller may keep and change it.
func (s *Store) PendingSpawns(ctx context.Context, limit int) ([]execstore.SpawnEntry, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.RUnlock()
	entries := s.spawns.pending(limit)
	out := make([]execstore.SpawnEntry, len(entries))
	for i, e := range entries {
		m, err := contract.DecodeMap(e.item.context)
		if err != nil {
			return nil, err // never: the store encoded it
		}
		out[i] = execstore.SpawnEntry{Seq: e.seq, ParentID: e.source, ChildID: e.item.childID, Attempts: e.attempts,
			RootPath: e.item.rootPath, Context: m, CommittedAt: e.item.at}
	}
	return out, nil
}

// AckSpawn removes exactly spawn intent seq of parentID. It is idempotent.
func (s *Store) AckSpawn(ctx context.Context, parentID string, seq int64) error {
	if err := contract.ValidateID("parentID", parentID); err != nil {
		return err
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	s.spawns.ack(parentID, seq)
	return nil
}
