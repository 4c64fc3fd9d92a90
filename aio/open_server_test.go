package aio_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/pool"
	"github.com/execstore/execstore/server"
)

// Open against an address where nothing listens keeps retrying until its context ends, then
// names the address and never the credentials.
func TestOpenUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithTimeout(bg, 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = aio.Open(ctx, "mongodb://alice:s3cr3t-pw@"+addr+"/?serverSelectionTimeoutMS=200", aio.Options{Connection: server.Connection{PingInterval: 50 * time.Millisecond}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), addr)
	assert.NotContains(t, err.Error(), "s3cr3t-pw")
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Less(t, time.Since(start), 10*time.Second)
}

// Open started before the server listens waits for it.
func TestOpenWaitsForServer(t *testing.T) {
	cs, err := connstring.Parse(srv.URI)
	require.NoError(t, err)
	upstream := cs.Hosts[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	uri := strings.Replace(srv.URI, upstream, addr, 1)
	if !strings.Contains(uri, "?") {
		uri += "?"
	} else {
		uri += "&"
	}
	uri += "directConnection=true&serverSelectionTimeoutMS=300"

	type result struct {
		s   *aio.Store
		err error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(bg, 20*time.Second)
		defer cancel()
		s, err := aio.Open(ctx, uri, aio.Options{Connection: server.Connection{Database: testDatabase(t), PingInterval: 50 * time.Millisecond}})
		done <- result{s, err}
	}()
	time.Sleep(2 * time.Second) // the server is "down" for this long
	testserver.NewStallProxy(t, addr, upstream)
	r := <-done
	require.NoError(t, r.err)
	e := newExe("e")
	require.NoError(t, r.s.Save(bg, e))
	require.NoError(t, r.s.Close(bg))
}

// Open picks the profile by probing the server, and the probe says what the server does: a
// projection of the shape the MongoDB profile loads with, on a stored execution, returns the
// expression's value where the probe found it served and is refused where it found it
// refused.
func TestOpenProbesServer(t *testing.T) {
	h := newHarness(t, aio.Options{})
	info := h.store.Server()
	require.Len(t, info.Probes, 1)
	p := info.Probes[0]
	assert.Equal(t, server.ExpressionProjections, p.Feature)
	want := server.FerretDB
	if p.Served {
		want = server.MongoDB
	}
	assert.Equal(t, want, info.Profile)
	t.Logf("aio on %s %s: profile %s, probes %+v", info.Family, info.FerretDBVersion, info.Profile, info.Probes)

	require.NoError(t, h.store.Save(bg, newExe("e")))
	var got bson.Raw
	err := h.db.Collection("executions").FindOne(bg, bson.D{{Key: "_id", Value: "e"}},
		options.FindOne().SetProjection(bson.D{{Key: "hit", Value: bson.D{{Key: "$in", Value: bson.A{
			"e", bson.D{{Key: "$ifNull", Value: bson.A{"$missing", bson.A{"e"}}}}}}}}})).Decode(&got)
	if p.Served {
		require.NoError(t, err)
		assert.True(t, got.Lookup("hit").Boolean())
	} else {
		assert.Error(t, err)
		assert.NotEmpty(t, p.Refusal)
	}
}

// The FerretDB formulations are correct on every server: forced on, the contract still holds.
func TestForcedFerretDBProfile(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Profile: server.FerretDB}, TraceMax: 2})
	assert.Equal(t, server.FerretDB, h.store.Server().Profile)
	assert.Empty(t, h.store.Server().Probes, "a forced profile needs no probe")
	e := newExe("e")
	for i := range 4 {
		_, err := h.store.Commit(bg, e, execstore.Commit{ProcessedEventID: "p" + string(rune('0'+i)), Trace: map[string]any{"i": int64(i)}})
		require.NoError(t, err)
	}
	exe, hit, err := h.store.LoadForEvent(bg, "e", "p2")
	require.NoError(t, err)
	assert.True(t, hit)
	assert.EqualValues(t, 4, exe.Version)
	_, hit, err = h.store.LoadForEvent(bg, "e", "p9")
	require.NoError(t, err)
	assert.False(t, hit)
	trace, err := h.store.ReadTrace(bg, "e")
	require.NoError(t, err)
	require.Len(t, trace, 2)
	assert.Equal(t, []int64{2, 3}, []int64{trace[0].Index, trace[1].Index})
	assert.Equal(t, 2, rawLen(t, h.rawDoc(t, "e"), "trace"))
}

// Two stores (two processes) committing the same execution with seq blocks taken out of
// order: seqs stay unique, and the relay still sees that execution's entries in commit order.
func TestSeqsAcrossProcesses(t *testing.T) {
	h := newHarness(t, aio.Options{SeqBlockSize: 50})
	other := h.reopen(t, aio.Options{SeqBlockSize: 50})
	// other reserves its block first, so its seqs are lower than h.store's next block... or
	// higher: either way the two processes interleave.
	warm := newExe("warm")
	_, err := other.Commit(bg, warm, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("w")}}})
	require.NoError(t, err)
	e := newExe("e")
	stores := []*aio.Store{h.store, other}
	var all []int64
	for i := range 6 {
		seqs, err := stores[i%2].Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{Event: []byte{byte('0' + i)}}}})
		require.NoError(t, err)
		all = append(all, seqs...)
	}
	seen := map[int64]bool{}
	for _, s := range all {
		assert.False(t, seen[s], "seq %d twice", s)
		seen[s] = true
	}
	pending, err := h.store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	var order []string
	for _, p := range pending {
		if p.SourceID == "e" {
			order = append(order, string(p.Event))
		}
	}
	assert.Equal(t, []string{"0", "1", "2", "3", "4", "5"}, order)
}

// OpenClient uses the caller's client and leaves it connected at Close.
func TestOpenClient(t *testing.T) {
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI))
	require.NoError(t, err)
	defer client.Disconnect(bg)
	db := testDatabase(t)
	s, err := aio.OpenClient(bg, client, aio.Options{Connection: server.Connection{Database: db}})
	require.NoError(t, err)
	e := newExe("e")
	require.NoError(t, s.Save(bg, e))
	require.NoError(t, s.Close(bg))
	n, err := client.Database(db).Collection("executions").CountDocuments(bg, bson.D{})
	require.NoError(t, err, "the caller's client must stay usable")
	assert.EqualValues(t, 1, n)
	require.NoError(t, client.Database(db).Drop(bg))
}

// Write and read concerns are options; an acknowledged, journaled commit reads back.
func TestConcernOptions(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{WriteConcern: writeconcern.Journaled(), ReadConcern: readconcern.Local()}})
	e := newExe("e")
	h.cmds.reset()
	require.NoError(t, h.store.Save(bg, e))
	got, err := h.store.Load(bg, "e")
	require.NoError(t, err)
	assert.EqualValues(t, 1, got.Version)
	insert := h.cmds.command("insert")
	require.NotNil(t, insert)
	assert.True(t, insert.Lookup("writeConcern", "j").Boolean(), "insert sent without j:true: %s", insert)
	find := h.cmds.command("find")
	require.NotNil(t, find)
	assert.Equal(t, "local", find.Lookup("readConcern", "level").StringValue(), "find: %s", find)
}

// An unacknowledged write concern would make every commit's outcome unknown: refused at Open.
func TestOpenRefusesUnacknowledgedWrites(t *testing.T) {
	_, err := aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: testDatabase(t), WriteConcern: writeconcern.Unacknowledged()}})
	require.ErrorIs(t, err, execstore.ErrInvalid)
}

// withQuery adds a query option to a URI.
func withQuery(uri, opt string) string {
	if strings.Contains(uri, "?") {
		return uri + "&" + opt
	}
	return uri + "?" + opt
}

// An unacknowledged write concern from the URI or from the caller's client is refused at Open
// as surely as one given in Options: commits sent with w:0 would all have unknown outcomes.
func TestOpenRefusesUnacknowledgedClient(t *testing.T) {
	db := testDatabase(t)
	_, err := aio.Open(bg, withQuery(srv.URI, "w=0"), aio.Options{Connection: server.Connection{Database: db}})
	require.ErrorIs(t, err, execstore.ErrInvalid)
	assert.Contains(t, err.Error(), "URI")

	_, err = aio.Open(bg, srv.URI, aio.Options{Connection: server.Connection{Database: db, ClientOptions: options.Client().SetWriteConcern(writeconcern.Unacknowledged())}})
	require.ErrorIs(t, err, execstore.ErrInvalid)

	for _, uri := range []string{withQuery(srv.URI, "w=0"), srv.URI} {
		copts := options.Client().ApplyURI(uri)
		if uri == srv.URI {
			copts.SetWriteConcern(writeconcern.Unacknowledged())
		}
		client, err := mongo.Connect(copts)
		require.NoError(t, err)
		_, err = aio.OpenClient(bg, client, aio.Options{Connection: server.Connection{Database: db}})
		require.ErrorIs(t, err, execstore.ErrInvalid, "OpenClient on %s", uri)
		assert.Contains(t, err.Error(), "client's write concern")
		// A new client of the same settings: the refusal's probe was sent with w:0, which
		// FerretDB 2.x answers anyway, and the next command on that connection would read
		// that answer as its own (every later answer one behind).
		require.NoError(t, client.Disconnect(bg))
		client, err = mongo.Connect(copts)
		require.NoError(t, err)

		// The store's own write concern overrides the client's.
		s, err := aio.OpenClient(bg, client, aio.Options{Connection: server.Connection{Database: db, WriteConcern: writeconcern.W1()}})
		require.NoError(t, err)
		e := newExe("e")
		require.NoError(t, s.Save(bg, e))
		require.NoError(t, s.Close(bg))
		require.NoError(t, client.Database(db).Drop(bg))
		require.NoError(t, client.Disconnect(bg))
	}

	// An acknowledged URI write concern is accepted.
	s, err := aio.Open(bg, withQuery(srv.URI, "w=1"), aio.Options{Connection: server.Connection{Database: db}})
	require.NoError(t, err)
	require.NoError(t, s.Close(bg))
}

// A database written under one profile and then used under the other keeps a correct trace:
// the first traced write of each execution converts the trace to its own profile's shape
// (MongoDB's $push would fail on FerretDB's sub-document; FerretDB's $set by index would pad
// MongoDB's array with nulls), and every step reads back with its index, in order.
func TestProfileSwitchKeepsTrace(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Profile: server.FerretDB}, TraceMax: 3})
	asMongo := h.reopen(t, aio.Options{Connection: server.Connection{Profile: server.MongoDB}, TraceMax: 3})
	asFerret := h.reopen(t, aio.Options{Connection: server.Connection{Profile: server.FerretDB}, TraceMax: 3})

	wantTrace := func(s *aio.Store, want ...int64) {
		t.Helper()
		steps, err := s.ReadTrace(bg, "e")
		require.NoError(t, err)
		var got []int64
		for _, st := range steps {
			got = append(got, st.Index)
			assert.EqualValues(t, st.Index, st.Fields["i"], "step %d carries its own fields", st.Index)
		}
		assert.Equal(t, want, got)
	}
	traceType := func() bson.Type { return h.rawDoc(t, "e").Lookup("trace").Type }

	e := newExe("e")
	for i := range 3 {
		_, err := h.store.Commit(bg, e, execstore.Commit{Trace: map[string]any{"i": int64(i)}})
		require.NoError(t, err)
	}
	require.Equal(t, bson.TypeEmbeddedDocument, traceType(), "FerretDB's shape")

	// Under the MongoDB profile: a commit, then an append outside a commit.
	_, err := asMongo.Commit(bg, e, execstore.Commit{Trace: map[string]any{"i": int64(3)}})
	require.NoError(t, err)
	require.NoError(t, asMongo.AppendTrace(bg, "e", map[string]any{"i": int64(4)}))
	assert.Equal(t, bson.TypeArray, traceType(), "converted to MongoDB's shape")
	wantTrace(asMongo, 2, 3, 4)
	assert.EqualValues(t, 4, e.Version)

	// Back under the FerretDB profile, the append first this time.
	require.NoError(t, asFerret.AppendTrace(bg, "e", map[string]any{"i": int64(5)}))
	assert.Equal(t, bson.TypeEmbeddedDocument, traceType(), "converted back")
	_, err = asFerret.Commit(bg, e, execstore.Commit{Trace: map[string]any{"i": int64(6)}})
	require.NoError(t, err)
	wantTrace(asFerret, 4, 5, 6)
	wantTrace(asMongo, 4, 5, 6)
	for _, el := range rawElements(t, h.rawDoc(t, "e"), "trace") {
		assert.Equal(t, bson.TypeEmbeddedDocument, el.Value().Type, "no null left in the trace: %s", el)
	}
	assert.EqualValues(t, 5, e.Version)
}

func rawElements(t *testing.T, doc bson.Raw, key string) []bson.RawElement {
	t.Helper()
	elems, err := bson.Raw(doc.Lookup(key).Value).Elements()
	require.NoError(t, err)
	return elems
}

// Stores opened on one client can share one pool: one bound on operations in flight for the
// process. Closing one store waits for its own operations and leaves the pool serving the
// other; the pool's owner closes it last.
func TestStoresShareOnePool(t *testing.T) {
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI))
	require.NoError(t, err)
	defer client.Disconnect(bg)
	p := pool.New(pool.Config{Workers: 4, QueueDepth: 16})
	db := testDatabase(t)
	a, err := aio.OpenClient(bg, client, aio.Options{Connection: server.Connection{Database: db, Pool: p}})
	require.NoError(t, err)
	b, err := aio.OpenClient(bg, client, aio.Options{Connection: server.Connection{Database: db + "_b", Pool: p}})
	require.NoError(t, err)
	defer client.Database(db).Drop(bg)
	defer client.Database(db + "_b").Drop(bg)

	var futures []*aio.Future[[]int64]
	for i := range 20 {
		futures = append(futures, a.CommitAsync(bg, newExe(fmt.Sprintf("a%d", i)), execstore.Commit{}))
	}
	require.NoError(t, a.Close(bg))
	for _, f := range futures {
		_, err := f.Result()
		require.NoError(t, err, "an accepted commit of the closed store")
	}
	_, err = a.Load(bg, "a1")
	assert.ErrorIs(t, err, execstore.ErrClosed)

	e := newExe("b1")
	require.NoError(t, b.Save(bg, e), "the other store still runs on the pool")
	got, err := b.Load(bg, "b1")
	require.NoError(t, err)
	assert.EqualValues(t, 1, got.Version)
	require.NoError(t, b.Close(bg))
	require.NoError(t, p.Close(bg))
}

// Connection.Collection names the executions' collection: two stores of one database on two
// collections keep apart what they commit and relay (their seqs, from the database's one
// counters collection, stay unique), and an execution lands in its store's collection.
func TestCollectionOption(t *testing.T) {
	h := newHarness(t, aio.Options{Connection: server.Connection{Collection: "orders"}})
	other := h.reopen(t, aio.Options{Connection: server.Connection{Database: h.opts.Database}})

	e := newExe("e")
	seqs, err := h.store.Commit(bg, e, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("x")}}})
	require.NoError(t, err)
	f := newExe("e")
	otherSeqs, err := other.Commit(bg, f, execstore.Commit{Emits: []execstore.Emit{{TargetID: "t", Event: []byte("y")}}})
	require.NoError(t, err)
	assert.NotEqual(t, seqs, otherSeqs, "one counters collection: seqs stay unique")

	n, err := h.db.Collection("orders").CountDocuments(bg, bson.D{{Key: "_id", Value: "e"}})
	require.NoError(t, err)
	assert.EqualValues(t, 1, n)
	n, err = h.db.Collection("executions").CountDocuments(bg, bson.D{{Key: "_id", Value: "e"}})
	require.NoError(t, err)
	assert.EqualValues(t, 1, n, "the default collection holds the other store's")

	for s, want := range map[*aio.Store]string{h.store: "x", other: "y"} {
		pending, err := s.PendingOutbox(bg, 0)
		require.NoError(t, err)
		require.Len(t, pending, 1)
		assert.Equal(t, want, string(pending[0].Event))
	}
}

// A profile that is none of package server's is refused before any I/O (the URI names no
// server that answers), by Open and OpenClient, for aio and idem alike (one Open path).
func TestOpenRefusesUnknownProfile(t *testing.T) {
	const nowhere = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100"
	opts := aio.Options{Connection: server.Connection{Profile: "mongo"}}
	_, err := aio.Open(bg, nowhere, opts)
	require.ErrorIs(t, err, execstore.ErrInvalid)
	assert.Contains(t, err.Error(), `"mongo" is not a profile`)
	client, err := mongo.Connect(options.Client().ApplyURI(nowhere))
	require.NoError(t, err)
	defer client.Disconnect(bg)
	_, err = aio.OpenClient(bg, client, opts)
	require.ErrorIs(t, err, execstore.ErrInvalid)
	var iopts idem.Options
	iopts.Profile = "ferret"
	_, err = idem.Open(bg, nowhere, iopts)
	require.ErrorIs(t, err, execstore.ErrInvalid)
}

// Open drops only the obsolete indexes one listIndexes names: on a new database it sends no
// dropIndexes (each would be refused, IndexNotFound, and on DocumentDB roll back a
// transaction).
func TestOpenDropsOnlyTheObsoleteIndexesPresent(t *testing.T) {
	h := newHarness(t, aio.Options{})
	cmds := h.cmds.snapshot()
	assert.Contains(t, cmds, "listIndexes")
	assert.NotContains(t, cmds, "dropIndexes")
}
