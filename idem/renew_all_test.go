package idem

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/server"
)

// RenewAll renews every live claim in one write and tells which were fenced: a claim taken
// over after its lease lapsed is not renewed, the others are, and stay claimed past their
// first lease. Both formulations say the same.
func TestRenewAll(t *testing.T) {
	db := testDatabase(t)
	for i, s := range []*Store{
		openStore(t, Options{Connection: server.Connection{Database: db}}),
		openStore(t, Options{Connection: server.Connection{Database: db, Profile: server.FerretDB}}),
	} {
		name := fmt.Sprintf("%d-%s", i, s.Server().Profile)
		var held []Held
		for _, k := range []string{"a", "b", "c"} {
			c, err := s.Claim(bg, name+"/"+k, fp, 1, shortLease)
			require.NoError(t, err)
			require.Equal(t, New, c.Outcome)
			held = append(held, Held{Key: name + "/" + k, Token: c.Token})
		}
		time.Sleep(shortLease + 100*time.Millisecond)
		taken, err := s.Claim(bg, name+"/b", fp, 1, longLease)
		require.NoError(t, err)
		require.Equal(t, LeaseReclaimed, taken.Outcome)

		renewed, err := s.RenewAll(bg, held, longLease)
		require.NoError(t, err)
		assert.Equal(t, []bool{true, false, true}, renewed, name)
		time.Sleep(shortLease + 100*time.Millisecond)
		for _, k := range []string{"a", "c"} {
			rec, err := s.Get(bg, name+"/"+k)
			require.NoError(t, err)
			require.NotNil(t, rec)
			assert.False(t, rec.Lapsed, "%s: %s renewed for the long lease", name, k)
		}

		before := s.Stats().ServerCommands
		renewed, err = s.RenewAll(bg, []Held{held[0], held[2]}, longLease)
		require.NoError(t, err)
		assert.Equal(t, []bool{true, true}, renewed, name)
		assert.LessOrEqual(t, s.Stats().ServerCommands-before, int64(2), "%s: one write (and a reading of the clock) renews both", name)
	}
	s := openStore(t, Options{Connection: server.Connection{Database: db}})
	_, err := s.RenewAll(bg, []Held{{Key: "x", Token: ""}}, longLease)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	_, err = s.RenewAll(bg, nil, 0)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	renewed, err := s.RenewAll(bg, nil, longLease)
	require.NoError(t, err)
	assert.Empty(t, renewed)
}
