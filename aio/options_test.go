package aio_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/settingstest"
	"github.com/execstore/execstore/server"
)

// Every setting of Options the store cannot honour is refused by Open before any I/O, with an
// *execstore.InvalidError naming the field; a new field without a row fails the test.
func TestOpenRefusesWhatItCannotHonour(t *testing.T) {
	table := settingstest.Connection(func(o *aio.Options) *server.Connection { return &o.Connection })
	bad := settingstest.Value[aio.Options]
	row := table["Connection.Collection"]
	row.Bad = append(row.Bad, bad("counters", "Connection.Collection", func(o *aio.Options) { o.Collection = "counters" }))
	table["Connection.Collection"] = row
	for field, set := range map[string]func(o *aio.Options){
		"TraceMax":           func(o *aio.Options) { o.TraceMax = -1 },
		"DedupeWindow":       func(o *aio.Options) { o.DedupeWindow = -1 },
		"CacheSize":          func(o *aio.Options) { o.CacheSize = -1 },
		"SeqBlockSize":       func(o *aio.Options) { o.SeqBlockSize = -1 },
		"MaxBatch":           func(o *aio.Options) { o.MaxBatch = -1 },
		"MaxBatchesInFlight": func(o *aio.Options) { o.MaxBatchesInFlight = -1 },
	} {
		table[field] = settingstest.Row[aio.Options]{Bad: []settingstest.Bad[aio.Options]{bad("-1", "Options."+field, set)}}
	}
	table["Partitions"] = settingstest.Row[aio.Options]{Bad: []settingstest.Bad[aio.Options]{
		bad("-1", "Options.Partitions", func(o *aio.Options) { o.Partitions = -1 }),
		bad("MaxPartitions+1", "Options.Partitions", func(o *aio.Options) { o.Partitions = execstore.MaxPartitions + 1 }),
	}}
	table["DisableGroupCommit"] = settingstest.Row[aio.Options]{None: "a bool: either value is honoured"}
	table["DisableCoalescing"] = settingstest.Row[aio.Options]{None: "a bool: either value is honoured"}
	table["DisableAckCarrying"] = settingstest.Row[aio.Options]{None: "a bool: either value is honoured"}
	table["DisableRemoteWakes"] = settingstest.Row[aio.Options]{None: "a bool: either value is honoured"}
	table["AckWait"] = settingstest.Row[aio.Options]{Bad: []settingstest.Bad[aio.Options]{
		bad("-1s", "Options.AckWait", func(o *aio.Options) { o.AckWait = -time.Second })}}

	settingstest.Refused(t, table, func(t *testing.T, set func(*aio.Options)) (int64, error) {
		var commands atomic.Int64
		opts := aio.Options{Connection: server.Connection{Database: testDatabase(t),
			ClientOptions: settingstest.ClientOptions(&commands), ConnectTimeout: time.Minute}}
		set(&opts)
		s, err := aio.Open(context.Background(), srv.URI, opts)
		if err == nil {
			require.NoError(t, s.Close(context.Background()))
		}
		return commands.Load(), err
	})
}

// An empty URI (an unset MONGODB_URI) is refused as "uri", before any I/O, with a message
// that says what a URI looks like and nothing garbled.
func TestOpenRefusesEmptyURI(t *testing.T) {
	_, err := aio.Open(context.Background(), "", aio.Options{})
	var ie *execstore.InvalidError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, "uri", ie.Field)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	assert.Equal(t, `execstore: invalid uri: is empty: a URI looks like mongodb://host:27017/ or mongodb+srv://cluster.example.net/ (is the variable it comes from set?)`, err.Error())
}

// OpenClient refuses what Open refuses, and ClientOptions, which only a client Open makes
// would use; nothing is sent.
func TestOpenClientRefusesClientOptions(t *testing.T) {
	var commands atomic.Int64
	client, err := mongo.Connect(settingstest.ClientOptions(&commands).ApplyURI(srv.URI))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	for name, opts := range map[string]aio.Options{
		"Connection.ClientOptions": {Connection: server.Connection{ClientOptions: settingstest.ClientOptions(&commands)}},
		"Connection.Workers":       {Connection: server.Connection{Workers: -1}},
		"Options.CacheSize":        {CacheSize: -1},
	} {
		before := commands.Load()
		_, err := aio.OpenClient(context.Background(), client, opts)
		var ie *execstore.InvalidError
		if assert.ErrorAs(t, err, &ie, name) {
			assert.Equal(t, name, ie.Field)
		}
		assert.Equal(t, before, commands.Load(), "%s: nothing sent", name)
	}
}

// Open against a closed port with a context without deadline gives up after ConnectTimeout,
// saying the connection was refused.
func TestOpenBoundedByConnectTimeout(t *testing.T) {
	_, err := aio.Open(context.Background(), "mongodb://127.0.0.1:1/", aio.Options{
		Connection: server.Connection{ConnectTimeout: 300 * time.Millisecond, PingInterval: 20 * time.Millisecond}})
	assert.ErrorIs(t, err, server.ErrConnectionRefused)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "server at 127.0.0.1:1 not reachable")
}
