package idem_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/server"
	"github.com/execstore/execstore/storetest"
)

// The lease suite on a Store against the test server (the embedded one, or MONGODB_URI's),
// with the formulation the server gets, and with the FerretDB one when that is another. It
// is the suite memstore.Leases passes: the two agree. It runs in package idem_test, as
// package storetest imports idem; so it starts a server of its own (none with MONGODB_URI
// set), and stops it when it ends.
func TestLeasesConformance(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	srv, err := testserver.Start(ctx)
	cancel()
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, srv.Close()) })

	open := func(t *testing.T, profile server.Profile) *idem.Store {
		s, err := idem.Open(context.Background(), srv.URI, idem.Options{Connection: server.Connection{
			Database: testserver.Database(t, "idemlease"), Profile: profile}})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, s.Close(context.Background())) })
		return s
	}
	detected := open(t, server.Detect).Server().Profile
	t.Logf("the server gets the %s formulation", detected)
	profiles := []server.Profile{server.Detect}
	if detected != server.FerretDB {
		profiles = append(profiles, server.FerretDB)
	}
	for _, profile := range profiles {
		name := string(profile)
		if profile == server.Detect {
			name = "Detected-" + string(detected)
		}
		t.Run(name, func(t *testing.T) {
			storetest.RunLeases(t, func(t *testing.T) storetest.LeaseStore { return open(t, profile) })
		})
	}
}
