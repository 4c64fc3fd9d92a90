package idem

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
)

// The reads that settle a claim or complete read the primary's latest state — local read
// concern, primary read preference — whatever the URI asks of ordinary reads: a lagging
// secondary would answer "not mine" for a claim that landed, or "fenced" for a response that
// was stored. Shown on the wire through a proxy that makes the driver send read preferences,
// next to an ordinary read that keeps the URI's.
func TestSettlingReadsReadThePrimary(t *testing.T) {
	cs, err := connstring.Parse(srv.URI)
	require.NoError(t, err)
	proxy := testserver.NewRouterProxy(t, cs.Hosts[0])
	monitor, last := lastFind(t)
	s, err := Open(bg, proxy.URI("readPreference=secondaryPreferred&readConcernLevel=majority"),
		Options{Connection: server.Connection{Database: testDatabase(t), ClientOptions: options.Client().SetMonitor(monitor)}, ReapInterval: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close(bg)) }()

	_, err = s.recs.findRaw(bg, "k")
	require.NoError(t, err)
	ordinary := last()
	assert.Equal(t, "majority", ordinary.Lookup("readConcern", "level").StringValue(), "an ordinary read: %s", ordinary)
	assert.Equal(t, "secondaryPreferred", ordinary.Lookup("$readPreference", "mode").StringValue(),
		"an ordinary read keeps the URI's read preference: %s", ordinary)

	assert.Nil(t, s.recs.readBack(bg, "k"))
	settle := last()
	assert.Equal(t, "local", settle.Lookup("readConcern", "level").StringValue(), "the settling read: %s", settle)
	_, err = settle.LookupErr("$readPreference")
	assert.Error(t, err, "the settling read must go to the primary (no $readPreference to a router): %s", settle)
}

// Connection.ReadConcern applies to the store's ordinary reads, as the URI's does; the
// settling read stays at local read concern.
func TestReadConcernOption(t *testing.T) {
	monitor, last := lastFind(t)
	s, err := Open(bg, srv.URI, Options{Connection: server.Connection{Database: testDatabase(t),
		ClientOptions: options.Client().SetMonitor(monitor), ReadConcern: readconcern.Majority()}, ReapInterval: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close(bg)) }()
	_, err = s.recs.findRaw(bg, "k")
	require.NoError(t, err)
	assert.Equal(t, "majority", last().Lookup("readConcern", "level").StringValue(), "an ordinary read: %s", last())
	assert.Nil(t, s.recs.readBack(bg, "k"))
	assert.Equal(t, "local", last().Lookup("readConcern", "level").StringValue(), "the settling read: %s", last())
}

// lastFind returns a command monitor and what returns the last find command it saw.
func lastFind(t *testing.T) (*event.CommandMonitor, func() bson.Raw) {
	var mu sync.Mutex
	var finds []bson.Raw
	monitor := &event.CommandMonitor{Started: func(_ context.Context, e *event.CommandStartedEvent) {
		if e.CommandName == "find" {
			mu.Lock()
			finds = append(finds, append(bson.Raw(nil), e.Command...))
			mu.Unlock()
		}
	}}
	return monitor, func() bson.Raw {
		mu.Lock()
		defer mu.Unlock()
		require.NotEmpty(t, finds)
		return finds[len(finds)-1]
	}
}
