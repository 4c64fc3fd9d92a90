package idem

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/leases"
)

// relayKeys are the keys the relays of both default lease keys claim, complete and list:
// the lease key itself (a store that is not partitioned), a member, partitions and the
// record that fixes the number of partitions.
func relayKeys() []string {
	var keys []string
	for _, lk := range []string{leases.RelayKey, leases.SweeperKey} {
		keys = append(keys, lk, leases.MemberKey(lk, "m1"), leases.PartitionKey(lk, 0),
			leases.PartitionKey(lk, 3), lk+"/partitioning")
	}
	return keys
}

// fingerprintOf is the fingerprint a relay claims key with.
func fingerprintOf(key string) string {
	if strings.Contains(key, "/members/") || strings.HasSuffix(key, "/partitioning") {
		return leases.MemberFingerprint(64)
	}
	return leases.Fingerprint
}

// relayClaimsAll claims every relay key as a relay does, and requires each claim to get the
// token: no record stands in its way.
func relayClaimsAll(t *testing.T, s *Store) []Held {
	t.Helper()
	var held []Held
	for _, key := range relayKeys() {
		c, err := s.ClaimAs(bg, key, fingerprintOf(key), 1, time.Minute, "m1")
		require.NoError(t, err, key)
		require.Equal(t, New, c.Outcome, "%s: the relay's claim finds the key free", key)
		held = append(held, Held{Key: key, Token: c.Token})
	}
	return held
}

// A request whose Idempotency-Key spells a relay's lease key neither creates, takes nor
// blocks a record the relay's lease calls see, whichever comes first, on one store serving
// both: the request runs its handler and is stored under ClientKey, and the relay's claims,
// lists, renewals and completes go on as if no request had come.
func TestRequestKeysNeverReachRelayLeases(t *testing.T) {
	t.Run("request first", func(t *testing.T) {
		s := openStore(t, Options{})
		h := &countingHandler{}
		srv := serve(t, s, MiddlewareOptions{}, h)
		for _, key := range relayKeys() {
			resp, _ := post(t, srv, `"`+key+`"`, "x")
			assert.Equal(t, http.StatusCreated, resp.StatusCode, key)
			rec, err := s.Get(bg, ClientKey(key))
			require.NoError(t, err)
			require.NotNil(t, rec, key)
			assert.Equal(t, Completed, rec.State, "%s: stored under ClientKey", key)
		}
		assert.Equal(t, int64(len(relayKeys())), h.runs.Load(), "every request ran")
		for _, lk := range []string{leases.RelayKey, leases.SweeperKey} {
			for _, prefix := range []string{leases.MembersPrefix(lk), leases.PartitionsPrefix(lk)} {
				recs, err := s.List(bg, prefix, 0)
				require.NoError(t, err)
				assert.Empty(t, recs, "the relay's list of %s sees no request", prefix)
			}
			for _, key := range []string{lk, lk + "/partitioning"} {
				rec, err := s.Get(bg, key)
				require.NoError(t, err)
				assert.Nil(t, rec, key)
			}
		}
		relayClaimsAll(t, s)
	})
	t.Run("lease first", func(t *testing.T) {
		s := openStore(t, Options{})
		held := relayClaimsAll(t, s)
		h := &countingHandler{}
		srv := serve(t, s, MiddlewareOptions{}, h)
		for _, key := range relayKeys() {
			resp, body := post(t, srv, key, "x")
			assert.Equal(t, http.StatusCreated, resp.StatusCode, "%s: %s", key, body)
			assert.Empty(t, resp.Header.Get(HeaderReplayed), key)
		}
		assert.Equal(t, int64(len(relayKeys())), h.runs.Load(), "no request was blocked")
		renewed, err := s.RenewAll(bg, held, time.Minute)
		require.NoError(t, err)
		for i, ok := range renewed {
			assert.True(t, ok, "%s: the relay still holds it", held[i].Key)
		}
		for _, c := range held {
			if strings.HasSuffix(c.Key, "/partitioning") {
				ok, err := s.Complete(bg, c.Key, c.Token, Response{Status: 200, Body: []byte("64")}, time.Hour)
				require.NoError(t, err)
				assert.True(t, ok, c.Key)
			}
		}
	})
}

// Do stores its key under ClientKey too: a key that spells a relay's lease runs fn, and
// leaves the relay's key free.
func TestDoStoresUnderClientKey(t *testing.T) {
	s := openStore(t, Options{})
	key := leases.PartitionKey(leases.RelayKey, 0)
	r, err := s.Do(bg, key, fp, func(context.Context) (Response, error) { return Response{Status: 201}, nil })
	require.NoError(t, err)
	assert.False(t, r.Replayed)
	rec, err := s.Get(bg, key)
	require.NoError(t, err)
	assert.Nil(t, rec, "the relay's key stays free")
	rec, err = s.Get(bg, ClientKey(key))
	require.NoError(t, err)
	require.NotNil(t, rec)
	assert.Equal(t, Completed, rec.State)
	assert.Equal(t, ClientPrefix+key, rec.Key)

	_, err = s.Do(bg, key, "another", func(context.Context) (Response, error) { return Response{Status: 201}, nil })
	var mismatch *FingerprintMismatchError
	require.ErrorAs(t, err, &mismatch)
	assert.Equal(t, key, mismatch.Key, "named as given")
}

// A key whose stored key would pass execstore.MaxIDBytes is refused before any I/O: Do says
// ErrInvalid, the middleware 400; one of MaxClientKeyBytes is stored.
func TestClientKeyLength(t *testing.T) {
	s := openStore(t, Options{})
	ok := func(context.Context) (Response, error) { return Response{Status: 201}, nil }
	_, err := s.Do(bg, strings.Repeat("k", MaxClientKeyBytes+1), fp, ok)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	_, err = s.Do(bg, "", fp, ok)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	assert.Zero(t, s.Stats().Ops["claim"].Calls, "refused before any I/O")
	_, err = s.Do(bg, strings.Repeat("k", MaxClientKeyBytes), fp, ok)
	require.NoError(t, err)

	h := &countingHandler{}
	srv := serve(t, s, MiddlewareOptions{}, h)
	resp, _ := post(t, srv, strings.Repeat("m", MaxClientKeyBytes+1), "x")
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	resp, _ = post(t, srv, strings.Repeat("m", MaxClientKeyBytes), "x")
	assert.Equal(t, http.StatusCreated, resp.StatusCode)
	assert.Equal(t, int64(1), h.runs.Load())
}
