package journal

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore/internal/settingstest"
	"github.com/execstore/execstore/server"
)

// Every setting of Options the journal cannot honour is refused by Open before any I/O, with
// an *execstore.InvalidError naming the field; a new field without a row fails the test.
func TestOpenRefusesWhatItCannotHonour(t *testing.T) {
	table := settingstest.Connection(func(o *Options) *server.Connection { return &o.Connection })
	bad := settingstest.Value[Options]
	add := func(field string, b settingstest.Bad[Options]) {
		row := table[field]
		row.Bad = append(row.Bad, b)
		table[field] = row
	}
	// The settings the journal has no use for are refused whatever their value.
	add("Connection.WriteConcern", bad("majority", "Connection.WriteConcern", func(o *Options) { o.WriteConcern = writeconcern.Majority() }))
	add("Connection.ReadConcern", bad("majority", "Connection.ReadConcern", func(o *Options) { o.ReadConcern = readconcern.Majority() }))
	add("Connection.SettleTimeout", bad("1s", "Connection.SettleTimeout", func(o *Options) { o.SettleTimeout = time.Second }))
	add("Connection.Profile", bad("mongodb", "Connection.Profile", func(o *Options) { o.Profile = server.MongoDB }))
	add("Connection.ClientOptions", bad("retryable writes", "Connection.ClientOptions", func(o *Options) { o.ClientOptions.SetRetryWrites(true) }))
	table["WriteTimeout"] = settingstest.Row[Options]{Bad: []settingstest.Bad[Options]{
		bad("-1s", "Options.WriteTimeout", func(o *Options) { o.WriteTimeout = -time.Second })}}
	table["AcceptWeakDurability"] = settingstest.Row[Options]{None: "a bool: either value is honoured"}
	table["Retention"] = settingstest.Row[Options]{Bad: []settingstest.Bad[Options]{
		bad("-1s", "Options.Retention", func(o *Options) { o.Retention = -time.Second })}}
	table["RetentionInterval"] = settingstest.Row[Options]{Bad: []settingstest.Bad[Options]{
		bad("-1s", "Options.RetentionInterval", func(o *Options) { o.RetentionInterval = -time.Second })}}
	table["RetentionBatch"] = settingstest.Row[Options]{Bad: []settingstest.Bad[Options]{
		bad("-1", "Options.RetentionBatch", func(o *Options) { o.RetentionBatch = -1 }),
		bad("above MaxRetentionBatch", "Options.RetentionBatch", func(o *Options) { o.RetentionBatch = MaxRetentionBatch + 1 })}}

	settingstest.Refused(t, table, func(t *testing.T, set func(*Options)) (int64, error) {
		var commands atomic.Int64
		opts := testOptions(t)
		opts.ClientOptions = settingstest.ClientOptions(&commands)
		opts.ConnectTimeout = time.Minute
		set(&opts)
		j, err := Open(context.Background(), srv.URI, testRing, opts)
		if err == nil {
			require.NoError(t, j.Close(context.Background()))
		}
		return commands.Load(), err
	})
}
