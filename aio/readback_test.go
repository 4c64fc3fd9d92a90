package aio_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
)

// The reads that settle a write read the primary's latest state: local read concern and
// primary read preference, although the store reads majority-committed data from secondaries
// by preference. Shown on the wire for the conflict check of a single commit and for the
// read-back of a group commit, next to an ordinary load that keeps the store's settings.
func TestSettlingReadsReadThePrimary(t *testing.T) {
	cs, err := connstring.Parse(srv.URI)
	require.NoError(t, err)
	proxy := testserver.NewRouterProxy(t, cs.Hosts[0])

	for _, grouped := range []bool{false, true} {
		t.Run(fmt.Sprintf("grouped=%v", grouped), func(t *testing.T) {
			log := &commandLog{}
			opts := aio.Options{
				Connection:         server.Connection{Database: testDatabase(t), ReadConcern: readconcern.Majority(), ClientOptions: options.Client().SetMonitor(log.monitor())},
				DisableGroupCommit: !grouped,
			}
			s, err := aio.Open(bg, proxy.URI("readPreference=secondaryPreferred"), opts)
			require.NoError(t, err)
			defer func() { require.NoError(t, s.Close(bg)) }()

			e := newExe("e")
			require.NoError(t, s.Save(bg, e))
			other := *e
			require.NoError(t, s.Save(bg, &other)) // the competitor moves it to version 2

			log.reset()
			loaded, err := s.Load(bg, "e")
			require.NoError(t, err)
			require.EqualValues(t, 2, loaded.Version)
			load := log.command("find")
			require.NotNil(t, load)
			assert.Equal(t, "majority", load.Lookup("readConcern", "level").StringValue(), "an ordinary load: %s", load)
			assert.Equal(t, "secondaryPreferred", load.Lookup("$readPreference", "mode").StringValue(),
				"an ordinary load keeps the URI's read preference: %s", load)

			log.reset()
			err = s.Save(bg, e) // stale: version 1
			var conflict *execstore.ConflictError
			require.ErrorAs(t, err, &conflict)
			assert.EqualValues(t, 2, conflict.Found)
			settle := log.command("find")
			require.NotNil(t, settle, "commands: %v", log.snapshot())
			assert.Equal(t, "local", settle.Lookup("readConcern", "level").StringValue(), "the settling read: %s", settle)
			_, err = settle.LookupErr("$readPreference")
			assert.Error(t, err, "the settling read must go to the primary (no $readPreference to a router): %s", settle)
			if grouped {
				assert.Contains(t, log.snapshot(), "update", "a grouped commit is a bulk update")
				_, err := settle.LookupErr("filter", "_id", "$in")
				assert.NoError(t, err, "the group commit's read-back: %s", settle)
			}
		})
	}
}
