package embedded

import (
	"sync"

	"go.mongodb.org/mongo-driver/v2/x/bsonx/bsoncore"
)

// This file keeps what the front knows of document sizes, so that the size check can let
// most updates through without reading the documents they change.
//
// sizeBounds holds, per database and collection, an upper bound of the encoded size of
// documents, keyed by _id. What always holds, for every write that reaches FerretDB through
// the front: when sizeBounds holds a bound for an _id, the document of that collection with
// that _id, if there is one, is no larger than the bound. It holds because bounds are only
// learned inside the write slot of their database, from what the front knows for sure:
//
//   - an insert FerretDB reports as done sets the bound of each inserted document to its
//     size, once FerretDB's reply has been read (a duplicate _id leaves the stored document,
//     and its bound, as they were);
//   - an update or findAndModify that names its documents by _id sets each one's bound to
//     what the statement can make of the bound it had (statement.boundAfter) before it is
//     forwarded. That bound holds whether or not the statement then runs;
//   - a document whose bound is unknown, or would pass the limit, is read, and its bound
//     is then computed from its exact size;
//   - a write the front cannot attribute to _ids, whose outcome is unknown, or that the
//     check runs itself, forgets the bounds it may touch: its _ids', its collection's, its
//     database's, or all of them. A delete or a drop cannot make a document larger; it
//     forgets what it removes only to keep the memory small.
//
// A write that reaches FerretDB another way (BareURI) is not seen: after it, a bound may be
// lower than the document it bounds.
//
// Only _ids of type string and ObjectID are kept: they are equal exactly when their bytes
// are, so that a filter's _id and the stored one name the same key. Numbers are not (1,
// 1.0 and int64(1) are one _id to FerretDB), nor documents or others: their documents are
// read each time.
//
// Writes from other databases' slots (renameCollection runs in admin's, an aggregate's
// $out may name another database) forget every bound before and after they run, and an
// insert whose reply comes after such a forgetting does not set the bounds it learned:
// epoch tells.

// maxBoundEntries bounds the number of _ids sizeBounds keeps, over all collections; past it
// they are all forgotten. Each takes some 100 bytes.
const maxBoundEntries = 1 << 17

// namespace names a collection.
type namespace struct{ database, collection string }

// sizeBounds holds upper bounds of document sizes. Its methods are safe for concurrent use.
// The guard sets a bound only while the front holds the write slot of its database; it may
// forget bounds at any time (forgetAll, and the cap of maxBoundEntries, forget those of
// every database).
type sizeBounds struct {
	mu      sync.Mutex
	bounds  map[namespace]map[string]int // by collection, then by boundKey of _id
	entries int
	// epoch counts forgetAll calls.
	epoch uint64
}

func newSizeBounds() *sizeBounds {
	return &sizeBounds{bounds: make(map[namespace]map[string]int)}
}

// boundKey returns the key of the _id value id, and false for an _id whose bound is not
// kept.
func boundKey(id bsoncore.Value) (string, bool) {
	switch id.Type {
	case bsoncore.TypeString, bsoncore.TypeObjectID:
		return string(byte(id.Type)) + string(id.Data), true
	}
	return "", false
}

// get returns the bound of key in ns.
func (b *sizeBounds) get(ns namespace, key string) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, ok := b.bounds[ns][key]
	return n, ok
}

// set sets the bounds of ns to sizes, by key.
func (b *sizeBounds) set(ns namespace, sizes map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.setLocked(ns, sizes)
}

func (b *sizeBounds) setLocked(ns namespace, sizes map[string]int) {
	m := b.bounds[ns]
	if m == nil {
		m = make(map[string]int, len(sizes))
		b.bounds[ns] = m
	}
	for key, n := range sizes {
		if _, ok := m[key]; !ok {
			if b.entries >= maxBoundEntries {
				clear(b.bounds)
				b.entries = 0
				m = make(map[string]int, len(sizes))
				b.bounds[ns] = m
			}
			b.entries++
		}
		m[key] = n
	}
}

// setSince sets the bounds of ns to sizes when no forgetAll has run since epoch was read,
// and else forgets them.
func (b *sizeBounds) setSince(epoch uint64, ns namespace, sizes map[string]int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.epoch != epoch {
		b.forgetLocked(ns, keysOf(sizes))
		return
	}
	b.setLocked(ns, sizes)
}

// currentEpoch returns the number of forgetAll calls so far.
func (b *sizeBounds) currentEpoch() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.epoch
}

// forget forgets the bounds of keys in ns.
func (b *sizeBounds) forget(ns namespace, keys []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.forgetLocked(ns, keys)
}

func (b *sizeBounds) forgetLocked(ns namespace, keys []string) {
	m := b.bounds[ns]
	for _, key := range keys {
		if _, ok := m[key]; ok {
			delete(m, key)
			b.entries--
		}
	}
	if m != nil && len(m) == 0 {
		delete(b.bounds, ns)
	}
}

// forgetCollection forgets every bound of ns.
func (b *sizeBounds) forgetCollection(ns namespace) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries -= len(b.bounds[ns])
	delete(b.bounds, ns)
}

// forgetDatabase forgets every bound of database.
func (b *sizeBounds) forgetDatabase(database string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ns, m := range b.bounds {
		if ns.database == database {
			b.entries -= len(m)
			delete(b.bounds, ns)
		}
	}
}

// forgetAll forgets every bound, and starts a new epoch.
func (b *sizeBounds) forgetAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	clear(b.bounds)
	b.entries = 0
	b.epoch++
}

// size returns the number of bounds kept.
func (b *sizeBounds) size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entries
}

func keysOf(sizes map[string]int) []string {
	keys := make([]string, 0, len(sizes))
	for key := range sizes {
		keys = append(keys, key)
	}
	return keys
}
