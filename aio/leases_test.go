package aio_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
)

// LeaseStore opens one idem store in the database named after the store's, in the collection
// named as the executions collection, returns it again on later calls, and is closed by
// Close: two stores on one database see each other's claims, and a call after Close is
// refused.
func TestLeaseStoreOnTheStoresDatabase(t *testing.T) {
	h := newHarness(t, aio.Options{})
	var opts aio.Options
	opts.Database = h.opts.Database
	other, err := aio.Open(bg, srv.URI, opts)
	require.NoError(t, err)

	ls, err := h.store.LeaseStore(bg)
	require.NoError(t, err)
	again, err := h.store.LeaseStore(bg)
	require.NoError(t, err)
	assert.Same(t, ls, again, "later calls return the store opened first")
	lsOther, err := other.LeaseStore(bg)
	require.NoError(t, err)
	assert.NotSame(t, ls, lsOther)

	c, err := ls.ClaimAs(bg, "test/lease", "fp", 1, time.Minute, "a")
	require.NoError(t, err)
	require.True(t, c.Held())
	seen, err := lsOther.ClaimAs(bg, "test/lease", "fp", 1, time.Minute, "b")
	require.NoError(t, err)
	assert.Equal(t, idem.AlreadyClaimed, seen.Outcome, "the other store's lease store is on the same records")
	require.NotNil(t, seen.Record)
	assert.Equal(t, "a", seen.Record.Holder)
	leasesDB := h.db.Client().Database(h.opts.Database + "_leases")
	t.Cleanup(func() { _ = leasesDB.Drop(bg) })
	n, err := leasesDB.Collection("executions").CountDocuments(bg, bson.D{{Key: "_id", Value: "test/lease"}})
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the record is in the database named after the store's, in the executions collection's name")

	ctx, cancel := context.WithTimeout(bg, 30*time.Second)
	defer cancel()
	require.NoError(t, other.Close(ctx))
	_, err = lsOther.ClaimAs(bg, "test/other", "fp", 1, time.Minute, "b")
	assert.ErrorIs(t, err, execstore.ErrClosed, "Close closed the lease store")
	_, err = other.LeaseStore(bg)
	assert.ErrorIs(t, err, execstore.ErrClosed)
}

// A store closed before LeaseStore was called opens none.
func TestLeaseStoreAfterClose(t *testing.T) {
	h := newHarness(t, aio.Options{})
	var opts aio.Options
	opts.Database = h.opts.Database
	s, err := aio.Open(bg, srv.URI, opts)
	require.NoError(t, err)
	require.NoError(t, s.Close(bg))
	_, err = s.LeaseStore(bg)
	assert.ErrorIs(t, err, execstore.ErrClosed)
}

// The stores of two executions collections of one database keep their leases apart: the
// relays without a lease of one do not share the partitions of the other's.
func TestLeaseStorePerCollection(t *testing.T) {
	h := newHarness(t, aio.Options{})
	var opts aio.Options
	opts.Database, opts.Collection = h.opts.Database, "other_executions"
	other, err := aio.Open(bg, srv.URI, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Close(bg) })
	ls, err := h.store.LeaseStore(bg)
	require.NoError(t, err)
	lsOther, err := other.LeaseStore(bg)
	require.NoError(t, err)
	c, err := ls.ClaimAs(bg, "test/lease", "fp", 1, time.Minute, "a")
	require.NoError(t, err)
	require.True(t, c.Held())
	c, err = lsOther.ClaimAs(bg, "test/lease", "fp", 1, time.Minute, "b")
	require.NoError(t, err)
	assert.True(t, c.Held(), "the other collection's lease store holds its own records")
}
