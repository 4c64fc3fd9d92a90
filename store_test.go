package execstore_test

import (
	"context"
	"testing"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/aiotest"
	"github.com/execstore/execstore/server"
	"github.com/execstore/execstore/storetest"
)

// The contract (package storetest) on the MongoDB store, and the harness it shares with the
// crash and chaos tests. What only the MongoDB store can show is tested beside it, in aio.

// harness is one store on a database of its own, plus a raw view of that database.
type harness struct {
	store *aio.Store
	db    *mongo.Database
	opts  aio.Options
}

func newHarness(t testing.TB, opts aio.Options) *harness {
	t.Helper()
	if opts.Database == "" {
		opts.Database = testDatabase(t)
	}
	s, db := aiotest.Open(t, srv.URI, opts)
	return &harness{store: s, db: db, opts: opts}
}

// reopen returns a second store on the same database with other options.
func (h *harness) reopen(t testing.TB, opts aio.Options) *aio.Store {
	t.Helper()
	opts.Database = h.opts.Database
	return aiotest.Reopen(t, srv.URI, opts)
}

// rawInt reads an integer field of a stored document, whatever BSON number type holds it.
var rawInt = aiotest.RawInt

var bg = context.Background()

// contractConfigs are the configurations the contract suite runs the MongoDB store in: group
// commit and coalescing on (the default) and off, and on with the snapshot cache.
var contractConfigs = []struct {
	name string
	opts aio.Options
}{
	{"grouped=true", grouping(true, aio.Options{})},
	{"grouped=false", grouping(false, aio.Options{})},
	{"cached", aio.Options{CacheSize: testCacheSize}},
}

// testCacheSize is the snapshot cache of the tests that turn it on: more executions than any
// test uses, so that nothing is evicted unless a test means it.
const testCacheSize = 1024

// The execstore contract on the MongoDB store, in each of contractConfigs.
func TestContract(t *testing.T) {
	for _, cfg := range contractConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel() // each configuration on databases of its own
			storetest.Run(t, func(t *testing.T) execstore.Store {
				return newHarness(t, cfg.opts).store
			})
		})
	}
}

// Two MongoDB stores over the same database, as two processes of an engine have them, each
// in each of contractConfigs (so each with a snapshot cache of its own, in "cached").
func TestContractShared(t *testing.T) {
	for _, cfg := range contractConfigs {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			storetest.RunShared(t, func(t *testing.T) (execstore.Store, execstore.Store) {
				h := newHarness(t, cfg.opts)
				return h.store, h.reopen(t, cfg.opts)
			})
		})
	}
}

// The trace and dedupe windows on the MongoDB store, with the detected profile's
// formulations, with FerretDB's forced, and with the snapshot cache on.
func TestContractWindows(t *testing.T) {
	for _, cfg := range []struct {
		name string
		opts aio.Options
	}{
		{"profile=detect", aio.Options{}},
		{"profile=ferretdb", aio.Options{Connection: server.Connection{Profile: server.FerretDB}}},
		{"cached", aio.Options{CacheSize: testCacheSize}},
	} {
		t.Run(cfg.name, func(t *testing.T) {
			t.Parallel()
			storetest.RunWindows(t, func(t *testing.T, w storetest.Windows) execstore.Store {
				opts := cfg.opts
				opts.TraceMax, opts.DedupeWindow = w.TraceMax, w.DedupeWindow
				return newHarness(t, opts).store
			})
		})
	}
}

// grouping returns opts with group commit and coalescing on or off.
func grouping(on bool, opts aio.Options) aio.Options {
	opts.DisableGroupCommit, opts.DisableCoalescing = !on, !on
	return opts
}
