package aio

import (
	"bytes"
	"container/list"
	"errors"
	"sync"
	"sync/atomic"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
)

// cacheMaxEvents bounds the event ids a cache entry remembers when the dedupe window is off
// (with a window W it remembers at most the 2×W the server keeps, plus the ids it learned from
// reads of the current generation). Forgetting an id costs nothing but a round trip: a
// LoadForEvent that no longer knows the event was processed answers false, and the commit's
// dedupe guard refuses the duplicate.
const cacheMaxEvents = 128

// snapshotCache is the store's snapshot cache (Options.CacheSize): for the executions this
// process committed or read most recently, the snapshot as it last saw it stored and the ids
// of events it knows are in the dedupe set at that snapshot.
//
// Every answer it gives is a fact about the execution's history, which is linear (each version
// is written by exactly one commit on top of the one before): a snapshot the server may have
// moved past since, and event ids that were in the dedupe set at a version the entry has seen.
// A stale snapshot costs the caller one failed commit (its version guard refuses it, and the
// entry is dropped); nothing it says can make a commit succeed that should not.
//
// Its one invariant beyond that: it never holds a snapshot older than one this process has
// committed or read since. Entries only move forward, and an entry is put where none is only
// if nothing was forgotten since the read or commit that produced it was sent (epoch): no
// entry was removed (dropped or evicted: it may have held a newer snapshot than that read
// returned), no put was refused and no commit failed without an entry to drop (either may
// stand for a version no entry records). An answer sent after such an event reflects it, so
// it is accepted. The epoch is the cache's, not an entry's: a cache sized for its working
// set rarely moves it; one that keeps evicting refuses more first fills.
type snapshotCache struct {
	max    int
	window int // the store's dedupe window

	mu    sync.Mutex
	lru   *list.List // of *cacheEntry, most recently used first
	byID  map[string]*list.Element
	epoch uint64 // how many entries have been removed

	hits, misses atomic.Int64
}

// cacheEntry is one execution's snapshot and the event ids known to be processed on it.
type cacheEntry struct {
	exe    execstore.Execution // Data owned by the cache
	events []knownEvent        // oldest first
}

// knownEvent is an event id known to be in the dedupe set at version. exact: version is the
// one the commit that recorded it created (this process's own commit); otherwise the id was
// seen in the set of a snapshot at version, recorded by then, in that generation or the one
// before.
type knownEvent struct {
	id      string
	version int64
	exact   bool
}

func newSnapshotCache(size, window int) *snapshotCache {
	if size <= 0 {
		return nil
	}
	return &snapshotCache{max: size, window: window, lru: list.New(), byID: make(map[string]*list.Element)}
}

// lookup returns a copy of the cached snapshot of id and whether eventID is known to be
// processed on it; ok is false when id is not cached.
func (c *snapshotCache) lookup(id, eventID string) (exe *execstore.Execution, processed, ok bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[id]
	if el == nil {
		c.misses.Add(1)
		return nil, false, false
	}
	c.hits.Add(1)
	c.lru.MoveToFront(el)
	e := el.Value.(*cacheEntry)
	for _, k := range e.events {
		if k.id == eventID && c.held(k, e.exe.Version) {
			processed = true
			break
		}
	}
	cp := e.exe
	cp.Data = bytes.Clone(e.exe.Data)
	return &cp, processed, true
}

// held reports whether k is certainly still in the dedupe set at version current.
func (c *snapshotCache) held(k knownEvent, current int64) bool {
	switch {
	case c.window <= 0:
		return true // nothing is ever trimmed
	case k.exact:
		return contract.DedupeStillHeld(k.version, current, c.window)
	default:
		// Recorded in k.version's generation or the one before: certainly held while the
		// execution is still in k.version's generation.
		return current/int64(c.window) == k.version/int64(c.window)
	}
}

// mark returns the cache's epoch, to be passed to read or committed by an operation about
// to be sent.
func (c *snapshotCache) mark() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.epoch
}

// read records exe, as a read sent at epoch returned it, and eventID ("" for none) as in its
// dedupe set.
func (c *snapshotCache) read(exe *execstore.Execution, eventID string, epoch uint64) {
	var known []knownEvent
	if eventID != "" {
		known = []knownEvent{{id: eventID, version: exe.Version}}
	}
	c.put(exe, known, epoch)
}

// committed records exe as this process's commit (sent at epoch) has just written it, with
// the event it recorded ("" for none).
func (c *snapshotCache) committed(exe *execstore.Execution, eventID string, epoch uint64) {
	var known []knownEvent
	if eventID != "" {
		known = []knownEvent{{id: eventID, version: exe.Version, exact: true}}
	}
	c.put(exe, known, epoch)
}

func (c *snapshotCache) put(exe *execstore.Execution, known []knownEvent, epoch uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[exe.ID]
	if el == nil {
		if epoch != c.epoch {
			// An entry removed since may have been newer than exe. Refusing exe forgets
			// that exe exists, so it counts as a removal: a read still in flight may be
			// older than exe.
			c.epoch++
			return
		}
		cp := *exe
		cp.Data = bytes.Clone(exe.Data)
		el = c.lru.PushFront(&cacheEntry{exe: cp})
		c.byID[exe.ID] = el
		for c.lru.Len() > c.max {
			c.remove(c.lru.Back())
		}
	} else {
		c.lru.MoveToFront(el)
	}
	e := el.Value.(*cacheEntry)
	if exe.Version > e.exe.Version {
		e.exe = *exe
		e.exe.Data = bytes.Clone(exe.Data)
	}
	c.learn(e, known...)
}

// learn adds known to e's events, but for those e already knows are held as well.
func (c *snapshotCache) learn(e *cacheEntry, known ...knownEvent) {
next:
	for _, k := range known {
		for _, have := range e.events {
			if have.id == k.id && (have.exact || !k.exact) && c.held(have, e.exe.Version) {
				continue next
			}
		}
		e.events = append(e.events, k)
	}
	c.trim(e)
}

// trim forgets the event ids no longer certainly held, and the oldest past cacheMaxEvents.
func (c *snapshotCache) trim(e *cacheEntry) {
	skip := 0 // the oldest, past cacheMaxEvents
	if c.window <= 0 && len(e.events) > cacheMaxEvents {
		skip = len(e.events) - cacheMaxEvents
	}
	kept := e.events[:0]
	for _, k := range e.events[skip:] {
		if c.held(k, e.exe.Version) {
			kept = append(kept, k)
		}
	}
	clear(e.events[len(kept):])
	e.events = kept
}

// failed settles the entry of id after a commit made against version failed with err.
// A commit refused because its event was already processed at that very version leaves the
// snapshot current and teaches the event; any other failure (a conflict, an unknown outcome,
// a refusal) drops an entry no newer than version, since the server may hold a newer one.
func (c *snapshotCache) failed(id string, version int64, eventID string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.byID[id]
	if el == nil {
		// The commit may have written a version no entry records: a read still in flight
		// may be older than it.
		c.epoch++
		return
	}
	e := el.Value.(*cacheEntry)
	var ap *execstore.AlreadyProcessedError
	if errors.As(err, &ap) && ap.Version == version && e.exe.Version == version {
		c.learn(e, knownEvent{id: eventID, version: version})
		return
	}
	if e.exe.Version <= version {
		c.remove(el)
	}
}

// forget drops the entry of id, whatever it holds.
func (c *snapshotCache) forget(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.byID[id]; el != nil {
		c.remove(el)
	}
}

func (c *snapshotCache) remove(el *list.Element) {
	c.lru.Remove(el)
	delete(c.byID, el.Value.(*cacheEntry).exe.ID)
	c.epoch++
}

// The store's side of the cache: each is a no-op when the cache is off.

// cacheMark returns the cache's epoch for an operation about to be sent.
func (s *Store) cacheMark() uint64 {
	if s.cache == nil {
		return 0
	}
	return s.cache.mark()
}

// remember records what a read sent at epoch returned: exe (nil for none) and the event it
// found processed ("" for none).
func (s *Store) remember(exe *execstore.Execution, processed string, epoch uint64, err error) {
	if s.cache != nil && err == nil && exe != nil {
		s.cache.read(exe, processed, epoch)
	}
}

// commitWon records exe as the commit of eventID ("" for none), sent at epoch, has just
// written it (its version and trace index already updated).
func (s *Store) commitWon(exe *execstore.Execution, eventID string, epoch uint64) {
	if s.cache != nil {
		s.cache.committed(exe, eventID, epoch)
	}
}

// commitFailed records the failure of a commit of id made against version.
func (s *Store) commitFailed(id string, version int64, eventID string, err error) {
	if s.cache != nil {
		s.cache.failed(id, version, eventID, err)
	}
}

// errCommitAbandoned is what the cache is told of a commit that won after its caller gave up
// on it: the caller's execution cannot be copied, so the entry is dropped.
var errCommitAbandoned = errors.New("commit abandoned by its caller")

// forget drops what the cache holds of id.
func (s *Store) forget(id string) {
	if s.cache != nil {
		s.cache.forget(id)
	}
}

// processedEvent is eventID when a read found it processed, else "".
func processedEvent(eventID string, processed bool) string {
	if processed {
		return eventID
	}
	return ""
}
