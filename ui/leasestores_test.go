package ui

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/internal/leases"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
)

// The relays' leases are read where relays keep them: with none in the store's database,
// from the database named after it with "_leases" appended (the relay docs' layout), and the
// relays page names the collection it read.
func TestRelaysReadWhereTheyKeepTheirLeases(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db := testserver.Database(t, "ui")
	own := testserver.Collection(t, srv.URI, db+"_leases", "idempotency")
	t.Cleanup(func() { _ = own.Database().Drop(context.Background()) })
	idems, err := idem.Open(ctx, srv.URI, idem.Options{Connection: server.Connection{Database: db + "_leases"}, ReapInterval: -1})
	require.NoError(t, err)
	defer func() { require.NoError(t, idems.Close(ctx)) }()
	_, err = idems.ClaimAs(ctx, leases.MemberKey(leases.RelayKey, "relay-own-1"), leases.MemberFingerprint(2), 1, time.Hour, "relay-own-1")
	require.NoError(t, err)
	_, err = idems.ClaimAs(ctx, leases.PartitionKey(leases.RelayKey, 1), leases.Fingerprint, 1, time.Hour, "relay-own-1")
	require.NoError(t, err)

	m := newMonitored(t)
	ts := httptest.NewServer(Handler(Options{Database: m.client.Database(db)}))
	t.Cleanup(ts.Close)
	resp, body := get(t, ts, http.MethodGet, "/relays?format=json")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	var r inspect.Relays
	require.NoError(t, json.Unmarshal([]byte(body), &r))
	assert.Equal(t, db+"_leases.idempotency", r.Source)
	require.Len(t, r.Members, 1)
	assert.Equal(t, "relay-own-1", r.Members[0].Name)
	assert.Equal(t, 1, r.Members[0].Held)

	_, page := get(t, ts, http.MethodGet, "/relays")
	assert.Contains(t, page, "Leases read from <code>"+db+"_leases.idempotency</code>")
	for name := range m.commands() {
		assert.Contains(t, readCommands, name, "the UI sends only reads")
	}
}
