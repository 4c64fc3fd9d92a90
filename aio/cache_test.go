package aio

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
)

func cachedExe(id string, version int64, data string) *execstore.Execution {
	return &execstore.Execution{ID: id, Status: execstore.Running, Version: version, Data: []byte(data), TraceNext: version}
}

// lookupVersion returns the cached version of id, or -1 when it is not cached.
func lookupVersion(c *snapshotCache, id string) int64 {
	exe, _, ok := c.lookup(id, "")
	if !ok {
		return -1
	}
	return exe.Version
}

func TestCacheOff(t *testing.T) {
	assert.Nil(t, newSnapshotCache(0, 0))
	assert.Nil(t, newSnapshotCache(-1, 0))
}

// What the cache returns is a copy: neither the caller's changes to what it put nor to what
// it got reach the entry.
func TestCacheCopies(t *testing.T) {
	c := newSnapshotCache(4, 0)
	exe := cachedExe("a", 3, "abc")
	c.committed(exe, "e1", c.mark())
	exe.Data[0] = 'X'
	got, processed, ok := c.lookup("a", "e1")
	require.True(t, ok)
	assert.True(t, processed)
	assert.Equal(t, "abc", string(got.Data))
	assert.EqualValues(t, 3, got.Version)
	assert.EqualValues(t, 3, got.TraceNext)
	got.Data[0] = 'Y'
	again, processed, _ := c.lookup("a", "e2")
	assert.Equal(t, "abc", string(again.Data))
	assert.False(t, processed)
	assert.EqualValues(t, 2, c.hits.Load())
	_, _, ok = c.lookup("b", "e1")
	assert.False(t, ok)
	assert.EqualValues(t, 1, c.misses.Load())
}

// Entries only move forward: a read that returns an older snapshot than the entry holds
// leaves the entry alone.
func TestCacheNeverGoesBack(t *testing.T) {
	c := newSnapshotCache(4, 0)
	epoch := c.mark()
	c.committed(cachedExe("a", 5, "v5"), "", epoch)
	c.read(cachedExe("a", 4, "v4"), "", epoch)
	got, _, _ := c.lookup("a", "")
	assert.EqualValues(t, 5, got.Version)
	assert.Equal(t, "v5", string(got.Data))
	c.read(cachedExe("a", 6, "v6"), "", epoch)
	got, _, _ = c.lookup("a", "")
	assert.Equal(t, "v6", string(got.Data))
}

// A read or commit sent before an entry was removed puts nothing where there is no entry:
// the removed entry may have been newer than what it carries.
func TestCacheEpoch(t *testing.T) {
	c := newSnapshotCache(4, 0)
	c.committed(cachedExe("a", 7, "v7"), "", c.mark())
	sent := c.mark() // a read of "a" is sent now…
	c.failed("a", 7, "", &execstore.ConflictError{ExecutionID: "a", Expected: 7, Found: 8})
	c.read(cachedExe("a", 6, "v6"), "", sent) // …and answers late with an older snapshot
	assert.EqualValues(t, -1, lookupVersion(c, "a"))
	c.read(cachedExe("a", 8, "v8"), "", c.mark()) // a read sent after the drop fills it
	assert.EqualValues(t, 8, lookupVersion(c, "a"))

	// An eviction counts as a removal too, for every id.
	c2 := newSnapshotCache(1, 0)
	sent = c2.mark()
	c2.committed(cachedExe("x", 1, ""), "", sent)
	c2.committed(cachedExe("y", 1, ""), "", sent) // evicts x
	c2.read(cachedExe("z", 1, ""), "", sent)
	assert.EqualValues(t, -1, lookupVersion(c2, "x"))
	assert.EqualValues(t, 1, lookupVersion(c2, "y"))
	assert.EqualValues(t, -1, lookupVersion(c2, "z"))
}

// The least recently used entry is the one evicted.
func TestCacheLRU(t *testing.T) {
	c := newSnapshotCache(2, 0)
	c.committed(cachedExe("a", 1, ""), "", c.mark())
	c.committed(cachedExe("b", 1, ""), "", c.mark())
	_, _, _ = c.lookup("a", "") // a is now the most recent
	c.committed(cachedExe("c", 1, ""), "", c.mark())
	assert.EqualValues(t, 1, lookupVersion(c, "a"))
	assert.EqualValues(t, -1, lookupVersion(c, "b"))
	assert.EqualValues(t, 1, lookupVersion(c, "c"))
	assert.Equal(t, 2, c.lru.Len())
	assert.Len(t, c.byID, 2)
}

// A failed commit drops an entry no newer than the version it was made against; an
// AlreadyProcessedError at the entry's own version keeps it and teaches the event.
func TestCacheFailed(t *testing.T) {
	c := newSnapshotCache(4, 0)
	c.committed(cachedExe("a", 3, ""), "", c.mark())
	c.failed("a", 2, "", &execstore.ConflictError{ExecutionID: "a", Expected: 2, Found: 3})
	assert.EqualValues(t, 3, lookupVersion(c, "a"), "a stale commit of this process says nothing of a newer entry")

	c.failed("a", 3, "e9", &execstore.AlreadyProcessedError{ExecutionID: "a", EventID: "e9", Version: 3})
	_, processed, ok := c.lookup("a", "e9")
	require.True(t, ok)
	assert.True(t, processed)

	c.failed("a", 3, "e8", &execstore.AlreadyProcessedError{ExecutionID: "a", EventID: "e8", Version: 5})
	assert.EqualValues(t, -1, lookupVersion(c, "a"), "processed at a later version: the snapshot is stale")

	for _, err := range []error{
		&execstore.OutcomeUnknownError{Op: "commit", ExecutionID: "b", Err: errors.New("reset")},
		errCommitAbandoned,
		errors.New("refused"),
	} {
		c.committed(cachedExe("b", 1, ""), "", c.mark())
		c.failed("b", 1, "", err)
		assert.EqualValues(t, -1, lookupVersion(c, "b"), "%v", err)
	}
	c.forget("nothing") // no entry: nothing happens
}

// Without a window the cache remembers the last cacheMaxEvents events of an execution.
func TestCacheEventsUnbounded(t *testing.T) {
	c := newSnapshotCache(4, 0)
	n := cacheMaxEvents + 10
	for v := 1; v <= n; v++ {
		c.committed(cachedExe("a", int64(v), ""), fmt.Sprint("e", v), c.mark())
	}
	for v := 1; v <= n; v++ {
		_, processed, _ := c.lookup("a", fmt.Sprint("e", v))
		assert.Equal(t, v > n-cacheMaxEvents, processed, "e%d", v)
	}
	// A read's verdict is a fact of the linear history: it stays true.
	c.read(cachedExe("a", int64(n), ""), "old", c.mark())
	c.committed(cachedExe("a", int64(n+1), ""), "", c.mark())
	_, processed, _ := c.lookup("a", "old")
	assert.True(t, processed)
}

// With a window W the cache says processed only for the events the server's set certainly
// still holds: a commit's own event while its generation or the next is current; an event a
// read found, while the read's generation is current.
func TestCacheEventsWindow(t *testing.T) {
	const w = 3
	c := newSnapshotCache(4, w)
	c.committed(cachedExe("a", 4, ""), "e4", c.mark()) // generation 1
	c.read(cachedExe("a", 4, ""), "r", c.mark())
	for v := int64(5); v <= 9; v++ {
		c.committed(cachedExe("a", v, ""), "", c.mark())
		_, e4, _ := c.lookup("a", "e4")
		_, r, _ := c.lookup("a", "r")
		assert.Equal(t, v <= 8, e4, "e4 at v%d", v) // generation 2 still holds generation 1
		assert.Equal(t, v <= 5, r, "r at v%d", v)
	}
	e := c.byID["a"].Value.(*cacheEntry)
	assert.Empty(t, e.events, "what is no longer held is forgotten")
}

// A put refused for an absent entry, and a commit that failed with no entry to drop, each
// forget a version: a read still in flight from before must not be put either, or the cache
// would answer with a snapshot older than this process's own commit.
func TestCacheForgettingCountsAsRemoval(t *testing.T) {
	c := newSnapshotCache(1, 0)
	c.committed(cachedExe("z", 1, ""), "", c.mark())
	commitSent := c.mark()                               // a commit of x (v5 → v6) is sent…
	c.committed(cachedExe("y", 1, ""), "", c.mark())     // …an unrelated put evicts z…
	readSent := c.mark()                                 // …a read of x is sent, the server still at v5…
	c.committed(cachedExe("x", 6, ""), "e1", commitSent) // …the commit wins v6, its put is refused…
	c.read(cachedExe("x", 5, ""), "", readSent)          // …and the read answers v5.
	assert.EqualValues(t, -1, lookupVersion(c, "x"), "v5 would be older than this process's own v6")

	c.read(cachedExe("x", 6, ""), "", c.mark()) // a read sent now reflects the commit
	assert.EqualValues(t, 6, lookupVersion(c, "x"))

	// A commit whose outcome is unknown, of an execution with no entry: it may have written
	// v8; a read sent before it answers v7.
	c2 := newSnapshotCache(4, 0)
	readSent = c2.mark()
	c2.failed("w", 7, "", &execstore.OutcomeUnknownError{Op: "commit", ExecutionID: "w", Err: errors.New("reset")})
	c2.read(cachedExe("w", 7, ""), "", readSent)
	assert.EqualValues(t, -1, lookupVersion(c2, "w"))
}
