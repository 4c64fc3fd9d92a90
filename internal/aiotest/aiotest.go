// Package aiotest opens aio stores for the module's server tests: the root package's contract
// and crash tests and aio's own tests share it, so that a store, its raw database and their
// cleanup are made one way.
package aiotest

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/aio"
)

// timeout bounds opening, and closing, one store.
const timeout = 30 * time.Second

// Open opens a store at uri with opts (opts.Database must be set) and a raw client of its
// own on the same database. When t ends the store is closed, the database and the one of
// its lease store (aio.Store.LeaseStore) dropped and the raw client disconnected.
func Open(t testing.TB, uri string, opts aio.Options) (*aio.Store, *mongo.Database) {
	t.Helper()
	require.NotEmpty(t, opts.Database, "aiotest.Open needs a database of the test's own")
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := aio.Open(ctx, uri, opts)
	require.NoError(t, err)
	raw, err := mongo.Connect(options.Client().ApplyURI(uri))
	require.NoError(t, err)
	db := raw.Database(opts.Database)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		assert.NoError(t, s.Close(ctx))
		_ = db.Drop(ctx)
		_ = raw.Database(opts.Database + "_leases").Drop(ctx)
		_ = raw.Database(opts.Database + "_wakes").Drop(ctx)
		_ = raw.Disconnect(ctx)
	})
	return s, db
}

// Reopen opens a second store at uri with opts, closed when t ends: another process's view
// of the same database.
func Reopen(t testing.TB, uri string, opts aio.Options) *aio.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	s, err := aio.Open(ctx, uri, opts)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, s.Close(context.Background())) })
	return s
}

// RawInt reads an integer field of a stored document, whatever BSON number type holds it.
func RawInt(t testing.TB, doc bson.Raw, path ...string) int64 {
	t.Helper()
	v, err := doc.LookupErr(path...)
	require.NoError(t, err, "%v", path)
	n, ok := v.AsInt64OK()
	require.True(t, ok, "%v is %s", path, v.Type)
	return n
}
