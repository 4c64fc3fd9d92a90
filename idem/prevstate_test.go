package idem

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore/server"
)

// A claim that takes a record over records the state it took it from (prev_state), on
// either formulation, so that readers of the leases tell a take-over from a first claim.
func TestTakeOverRecordsPrevState(t *testing.T) {
	for _, profile := range []server.Profile{"", server.FerretDB} {
		t.Run("profile="+string(profile), func(t *testing.T) {
			s := openStore(t, Options{Connection: server.Connection{Database: testDatabase(t), Profile: profile}})
			coll := rawCollection(t, s)
			prev := func(key string) any {
				var doc bson.M
				require.NoError(t, coll.FindOne(bg, bson.D{{Key: "_id", Value: key}}).Decode(&doc))
				return doc[fPrevState]
			}
			c, err := s.ClaimAs(bg, "k", fp, 1, shortLease, "a")
			require.NoError(t, err)
			require.Equal(t, New, c.Outcome)
			assert.Nil(t, prev("k"), "a first claim took nothing over")
			require.Eventually(t, func() bool { // once the lease lapsed by the server's clock
				c, err = s.ClaimAs(bg, "k", fp, 1, longLease, "b")
				require.NoError(t, err)
				return c.Outcome == LeaseReclaimed
			}, 30*time.Second, 20*time.Millisecond)
			assert.Equal(t, string(Claimed), prev("k"), "taken over from a lapsed claim")
		})
	}
}
