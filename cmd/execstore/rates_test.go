package main

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/server"
)

// TestRates checks `rates`: the last minutes, summed over the members, a minute none
// recorded a row of zeros.
func TestRates(t *testing.T) {
	f := populateNothing(t)
	ctx := context.Background()
	store, err := aio.Open(ctx, srv.URI, aio.Options{Connection: server.Connection{Database: f.db}})
	require.NoError(t, err)
	defer store.Close(ctx)
	for _, s := range []execstore.RateRecord{
		{Component: "relay", Member: "a", At: testNow, To: execstore.RateTotals{Delivered: 5, Failed: 2}, BacklogAge: 1500 * time.Millisecond},
		{Component: "relay", Member: "b", At: testNow, From: execstore.RateTotals{Delivered: 7}, To: execstore.RateTotals{Delivered: 8, Dead: 1}},
		{Component: "sweeper", Member: "c", At: testNow.Add(-2 * time.Minute), To: execstore.RateTotals{Delivered: 3}},
	} {
		require.NoError(t, store.RecordRates(ctx, s))
	}
	text := f.inspect(t, "rates", "-minutes", "3")
	require.Equal(t, "rates of the last 3 minutes in "+f.db+".executions_rates, recorded by 3 relays and sweepers\n"+
		"  MINUTE                DELIVERED  FIRED  FAILED  DEAD  OLDEST WAIT\n"+
		"  2030-03-17T17:28:00Z  0          3      0       0     0.0s\n"+
		"  2030-03-17T17:29:00Z  0          0      0       0     0.0s\n"+
		"  2030-03-17T17:30:00Z  6          0      2       1     1.5s\n", text)
	var r inspect.Rates
	require.NoError(t, json.Unmarshal([]byte(f.inspect(t, "rates", "-json")), &r))
	require.Len(t, r.Minutes, 15)
	require.EqualValues(t, 6, r.Minutes[14].Delivered)
}
