package idem

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/settingstest"
	"github.com/execstore/execstore/server"
)

// Every setting of Options the store cannot honour is refused by Open before any I/O, with an
// *execstore.InvalidError naming the field; a new field without a row fails the test.
func TestOpenRefusesWhatItCannotHonour(t *testing.T) {
	table := settingstest.Connection(func(o *Options) *server.Connection { return &o.Connection })
	bad := settingstest.Value[Options]
	rows := func(bads ...settingstest.Bad[Options]) settingstest.Row[Options] {
		return settingstest.Row[Options]{Bad: bads}
	}
	table["Lease"] = rows(bad("-1s", "Options.Lease", func(o *Options) { o.Lease = -time.Second }),
		bad("1µs", "Options.Lease", func(o *Options) { o.Lease = time.Microsecond }))
	table["Retention"] = rows(bad("-1s", "Options.Retention", func(o *Options) { o.Retention = -time.Second }),
		bad("1µs", "Options.Retention", func(o *Options) { o.Retention = time.Microsecond }))
	table["Grace"] = rows(bad("-1s", "Options.Grace", func(o *Options) { o.Grace = -time.Second }))
	table["FingerprintVersion"] = rows(bad("-1", "Options.FingerprintVersion", func(o *Options) { o.FingerprintVersion = -1 }))
	table["WaitTimeout"] = rows(bad("-1s", "Options.WaitTimeout", func(o *Options) { o.WaitTimeout = -time.Second }))
	table["MaxBodyBytes"] = rows(bad("-1", "Options.MaxBodyBytes", func(o *Options) { o.MaxBodyBytes = -1 }),
		bad("MaxBodyLimit+1", "Options.MaxBodyBytes", func(o *Options) { o.MaxBodyBytes = MaxBodyLimit + 1 }))
	table["ReapInterval"] = settingstest.Row[Options]{None: "every value is honoured: negative disables the sweep"}
	table["ReapBatch"] = rows(bad("-1", "Options.ReapBatch", func(o *Options) { o.ReapBatch = -1 }))
	table["ClockRefresh"] = rows(bad("-1s", "Options.ClockRefresh", func(o *Options) { o.ClockRefresh = -time.Second }))
	table["Clock"] = settingstest.Row[Options]{None: "any clock is honoured; nil is time.Now"}

	settingstest.Refused(t, table, func(t *testing.T, set func(*Options)) (int64, error) {
		var commands atomic.Int64
		opts := Options{Connection: server.Connection{Database: testDatabase(t),
			ClientOptions: settingstest.ClientOptions(&commands), ConnectTimeout: time.Minute}}
		set(&opts)
		s, err := Open(context.Background(), srv.URI, opts)
		if err == nil {
			require.NoError(t, s.Close(context.Background()))
		}
		return commands.Load(), err
	})
}

// OpenClient refuses what Open refuses, and ClientOptions, which only a client Open makes
// would use; nothing is sent.
func TestOpenClientRefusesClientOptions(t *testing.T) {
	var commands atomic.Int64
	client, err := mongo.Connect(settingstest.ClientOptions(&commands).ApplyURI(srv.URI))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Disconnect(context.Background()) })
	for name, opts := range map[string]Options{
		"Connection.ClientOptions": {Connection: server.Connection{ClientOptions: settingstest.ClientOptions(&commands)}},
		"Connection.Database":      {Connection: server.Connection{Database: "bad.name"}},
		"Options.Lease":            {Lease: -time.Second},
	} {
		_, err := OpenClient(context.Background(), client, opts)
		var ie *execstore.InvalidError
		if assert.ErrorAs(t, err, &ie, name) {
			assert.Equal(t, name, ie.Field)
		}
	}
	assert.Zero(t, commands.Load(), "nothing sent")
}
