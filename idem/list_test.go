package idem

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/server"
)

// List returns the records under a prefix, in key order, with expiry judged by the server's
// clock: a released key is gone, a lapsed claim is Lapsed, a key that only shares the first
// letters of the prefix's last word is not under it. Both formulations say the same.
func TestListUnderPrefix(t *testing.T) {
	db := testDatabase(t)
	probed := openStore(t, Options{Connection: server.Connection{Database: db}})
	guarded := openStore(t, Options{Connection: server.Connection{Database: db, Profile: server.FerretDB}})
	claim := func(key string, lease time.Duration) Claim {
		c, err := probed.Claim(bg, key, fp, 1, lease)
		require.NoError(t, err)
		require.Equal(t, New, c.Outcome, key)
		return c
	}
	claim("m/b", longLease)
	claim("m/a", longLease)
	gone := claim("m/c", longLease)
	claim("m/d", shortLease)
	claim("mx/e", longLease)
	claim("l/f", longLease)
	ok, err := probed.Release(bg, "m/c", gone.Token)
	require.NoError(t, err)
	require.True(t, ok)
	time.Sleep(shortLease)

	for _, s := range []*Store{probed, guarded} {
		// m/d's lease has run out by this process's clock; a store's reading of the
		// server's may lag behind it a little, so ask until it shows.
		var recs []Record
		require.Eventually(t, func() bool {
			recs, err = s.List(bg, "m/", 0)
			require.NoError(t, err)
			return len(recs) == 3 && recs[2].Key == "m/d" && recs[2].Lapsed
		}, 10*time.Second, 20*time.Millisecond, "m/d shows as lapsed: %+v", recs)
		var keys []string
		var lapsed []bool
		for _, r := range recs {
			keys = append(keys, r.Key)
			lapsed = append(lapsed, r.Lapsed)
			assert.Equal(t, Claimed, r.State)
		}
		assert.Equal(t, []string{"m/a", "m/b", "m/d"}, keys, string(s.Server().Profile))
		assert.Equal(t, []bool{false, false, true}, lapsed, string(s.Server().Profile))

		recs, err = s.List(bg, "m/", 2)
		require.NoError(t, err)
		require.Len(t, recs, 2, "limit")
		assert.Equal(t, []string{"m/a", "m/b"}, []string{recs[0].Key, recs[1].Key}, "the first in key order")
	}
	_, err = probed.List(bg, "", 0)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	_, err = probed.List(bg, "m/", -1)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
}
