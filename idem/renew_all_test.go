package idem

import (
	"fmt"
	"slices"
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
		taken := claimOnceLapsed(t, s, name+"/b")
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

		// Each token renews its own claim only: a and c's tokens swapped renew neither, though
		// the write names both keys and both tokens.
		recA, err := s.Get(bg, held[0].Key)
		require.NoError(t, err)
		swapped := []Held{{Key: held[0].Key, Token: held[2].Token}, {Key: held[2].Key, Token: held[0].Token}}
		renewed, err = s.RenewAll(bg, swapped, 2*longLease)
		require.NoError(t, err)
		assert.Equal(t, []bool{false, false}, renewed, "%s: swapped tokens", name)
		after, err := s.Get(bg, held[0].Key)
		require.NoError(t, err)
		assert.Equal(t, recA.Until, after.Until, "%s: a's lease is not renewed by c's token", name)
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

// With one fenced lease among 64, RenewAll still costs one write and one read: exactly the
// fenced claim is false, the others are renewed, and the fenced record stays its new
// holder's. A completed claim is false too, and stays completed. Both formulations say the
// same.
func TestRenewAllOneFencedAmongMany(t *testing.T) {
	const fenced, done = 37, 5
	db := testDatabase(t)
	for i, c := range []struct {
		profile server.Profile
		n       int
	}{{server.Detect, 64}, {server.FerretDB, 64}, {server.Detect, 150}} {
		n := c.n
		conn := server.Connection{Database: db, Profile: c.profile}
		s := openStore(t, Options{Connection: conn, ReapInterval: -1})
		other := openStore(t, Options{Connection: conn, ReapInterval: -1})
		name := fmt.Sprintf("%d-%s-%d", i, s.Server().Profile, n)
		held := make([]Held, n)
		for i := range held {
			lease := longLease
			if i == fenced {
				lease = shortLease
			}
			key := fmt.Sprintf("%s/k%03d", name, i)
			c, err := s.Claim(bg, key, fp, 1, lease)
			require.NoError(t, err)
			require.Equal(t, New, c.Outcome)
			held[i] = Held{Key: key, Token: c.Token}
		}
		time.Sleep(shortLease)
		taken := claimOnceLapsed(t, other, held[fenced].Key)
		require.Equal(t, LeaseReclaimed, taken.Outcome)
		before := make([]*Record, n)
		var err error
		for i, h := range held {
			before[i], err = s.Get(bg, h.Key)
			require.NoError(t, err)
			require.NotNil(t, before[i])
		}

		// In an order other than the keys', so that renewed[i] is seen to be claims[i]'s.
		claims := slices.Clone(held)
		slices.Reverse(claims)
		sent := s.Stats().ServerCommands
		renewed, err := s.RenewAll(bg, claims, 2*longLease)
		require.NoError(t, err)
		reads, writes := int64((n+99)/100), int64(1)
		if s.Server().Profile == server.FerretDB {
			writes = int64((n + 95) / 96)
		}
		assert.Equal(t, writes+reads, s.Stats().ServerCommands-sent, "%s: the writes, and one read per 100 claims, whatever the number fenced", name)
		require.Len(t, renewed, n)
		for i, ok := range renewed {
			assert.Equal(t, claims[i].Key != held[fenced].Key, ok, "%s: %s", name, claims[i].Key)
		}
		for i, h := range held {
			rec, err := s.Get(bg, h.Key)
			require.NoError(t, err)
			require.NotNil(t, rec)
			if i == fenced {
				assert.Equal(t, taken.Token, rec.token, "%s: the fenced record is its new holder's", name)
				assert.Equal(t, before[i].Until, rec.Until, "%s: and its lease is not renewed", name)
				continue
			}
			assert.Equal(t, h.Token, rec.token, name)
			assert.True(t, rec.Until.After(before[i].Until), "%s: %s renewed", name, h.Key)
		}

		ok, err := s.Complete(bg, held[done].Key, held[done].Token, Response{Status: 201}, longLease)
		require.NoError(t, err)
		require.True(t, ok)
		renewed, err = s.RenewAll(bg, held, longLease)
		require.NoError(t, err)
		for i, ok := range renewed {
			assert.Equal(t, i != fenced && i != done, ok, "%s: %s", name, held[i].Key)
		}
		rec, err := s.Get(bg, held[done].Key)
		require.NoError(t, err)
		require.NotNil(t, rec)
		assert.Equal(t, Completed, rec.State, "%s: a completed record stays completed", name)
	}
}

// A claim reclaimed by another holder between RenewAll's write and its read is reported
// false: it is no longer held, whatever the write did. A claim fenced before the write is
// false, and one still held true, even when its lease has lapsed since (as Renew says).
func TestRenewAllReclaimedBetweenWriteAndRead(t *testing.T) {
	db := testDatabase(t)
	for i, profile := range []server.Profile{server.Detect, server.FerretDB} {
		conn := server.Connection{Database: db, Profile: profile}
		s := openStore(t, Options{Connection: conn, ReapInterval: -1})
		other := openStore(t, Options{Connection: conn, ReapInterval: -1})
		name := fmt.Sprintf("%d-%s", i, s.Server().Profile)
		var held []Held
		for _, k := range []string{"before", "between", "kept"} {
			c, err := s.Claim(bg, name+"/"+k, fp, 1, shortLease)
			require.NoError(t, err)
			require.Equal(t, New, c.Outcome)
			held = append(held, Held{Key: name + "/" + k, Token: c.Token})
		}
		time.Sleep(shortLease)
		require.Equal(t, LeaseReclaimed, claimOnceLapsed(t, other, held[0].Key).Outcome, name)
		var between Claim
		var err error
		s.afterRenewWrite = func() {
			// The write renewed it for a millisecond: take it over once that has lapsed.
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if between, err = other.Claim(bg, held[1].Key, fp, 1, longLease); err != nil || between.Held() {
					return
				}
			}
		}
		renewed, rerr := s.RenewAll(bg, held, time.Millisecond)
		s.afterRenewWrite = nil
		require.NoError(t, rerr)
		require.NoError(t, err)
		require.Equal(t, LeaseReclaimed, between.Outcome, name)
		assert.Equal(t, []bool{false, false, true}, renewed, name)
	}
}
