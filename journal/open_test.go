package journal

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/server"
)

// Open refuses a missing cipher and retryable writes, and a server where w: "majority" can
// mean one node (a standalone server, a replica set of one) unless the caller opts in; a
// replica set of more or a sharded cluster it accepts.
func TestOpenRefusesWeakSettings(t *testing.T) {
	opts := testOptions(t)
	_, err := Open(bg, srv.URI, nil, opts)
	require.ErrorIs(t, err, execstore.ErrInvalid)

	// A ring NewKeyRing refused (its error ignored) or a zero one: refused here, not by a
	// panic at the first checkpoint.
	short, ringErr := NewKeyRing(Key{ID: "k", Secret: []byte("too short")})
	require.Error(t, ringErr)
	for name, c := range map[string]Cipher{"typed nil ring": short, "zero ring": &KeyRing{}} {
		_, err = Open(bg, srv.URI, c, opts)
		require.ErrorIs(t, err, execstore.ErrInvalid, name)
		assert.ErrorIs(t, err, ErrNoKeys, name)
	}

	_, err = Open(bg, srv.URI+sep(srv.URI)+"retryWrites=true", testRing, opts)
	require.ErrorIs(t, err, execstore.ErrInvalid)
	withRetries := opts
	withRetries.ClientOptions = options.Client().SetRetryWrites(true)
	_, err = Open(bg, srv.URI, testRing, withRetries)
	require.ErrorIs(t, err, execstore.ErrInvalid)

	strict := opts
	strict.AcceptWeakDurability = false
	var logged bytes.Buffer
	strict.Logger = slog.New(slog.NewJSONHandler(&logged, nil))
	j, err := Open(bg, srv.URI, testRing, strict)
	if weak := durableByHello(serverHello(t), false); weak != nil {
		require.ErrorIs(t, err, execstore.ErrInvalid)
		assert.Equal(t, weak.Error(), err.Error())
		// The refusal is logged for the operator, whatever the caller does with the error.
		var rec map[string]any
		require.NoError(t, json.Unmarshal(logged.Bytes(), &rec), "one record: %s", logged.String())
		assert.Equal(t, "ERROR", rec["level"])
		assert.Equal(t, "journal", rec["store"])
		assert.Equal(t, err.Error(), rec["err"])
		return
	}
	assert.Empty(t, logged.String(), "nothing refused, nothing logged")
	require.NoError(t, err, "a server with majorities")
	require.NoError(t, j.Close(bg))
}

// serverHello returns the test server's hello reply (the embedded server is a standalone
// one; MONGODB_URI may name a replica set or a router), through a client of the test's own.
func serverHello(t *testing.T) bson.Raw {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(srv.URI))
	require.NoError(t, err)
	defer client.Disconnect(bg)
	hello, err := client.Database("admin").RunCommand(bg, bson.D{{Key: "hello", Value: 1}}).Raw()
	require.NoError(t, err)
	return hello
}

// sep is what joins one more option to uri.
func sep(uri string) string {
	if strings.Contains(uri, "?") {
		return "&"
	}
	if strings.HasSuffix(uri, "/") {
		return "?"
	}
	return "/?"
}

// A setting of server.Connection the journal cannot honour is refused with ErrInvalid before
// any I/O (the URI names no server that answers), naming the field; the settings it honours
// are accepted.
func TestOpenRefusesConnectionSettingsItCannotHonour(t *testing.T) {
	const nowhere = "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=100"
	for field, c := range map[string]server.Connection{
		"Connection.WriteConcern":  {WriteConcern: writeconcern.Majority()},
		"Connection.ReadConcern":   {ReadConcern: readconcern.Majority()},
		"Connection.SettleTimeout": {SettleTimeout: time.Second},
		"Connection.Profile":       {Profile: server.MongoDB},
	} {
		_, err := Open(bg, nowhere, testRing, Options{Connection: c})
		require.ErrorIs(t, err, execstore.ErrInvalid, field)
		assert.Contains(t, err.Error(), field)
	}
}

// The journal counts its operations, their failures and its server commands in the module's
// one Stats, and sheds load when asked to.
func TestStatsAndShedLoad(t *testing.T) {
	opts := testOptions(t)
	opts.Workers, opts.QueueDepth, opts.ShedLoad = 1, 1, true
	j := openJournal(t, testRing, opts)
	id := ident("stats-1")
	f, err := j.Claim(bg, id, "owner-a")
	require.NoError(t, err)
	_, err = j.Claim(bg, id, "owner-b")
	require.ErrorIs(t, err, execstore.ErrConflict)
	_, err = j.Read(bg, id.ID)
	require.NoError(t, err)
	_, _, err = j.Checkpoint(bg, f, PhaseBefore, []byte("state"))
	require.NoError(t, err)

	st := j.Stats()
	assert.Equal(t, server.OpStats{Calls: 2, Errors: 1}, st.Ops["claim"])
	assert.Equal(t, server.OpStats{Calls: 1}, st.Ops["read"])
	assert.Equal(t, server.OpStats{Calls: 1}, st.Ops["checkpoint"])
	assert.Greater(t, st.ServerCommands, int64(3), "the journal's client counts its commands")
	assert.Zero(t, st.OutcomeUnknown)

	// The worker busy and the queue full: a call is shed at once. (A call that finds room
	// instead waits behind the blocked ones until its context ends, and is withdrawn.)
	release := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	var once sync.Once
	defer once.Do(func() { close(release) })
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = submit(bg, j, "read", id.ID, func(ctx context.Context) (struct{}, error) {
				<-release
				return struct{}{}, nil
			})
		}()
	}
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(bg, 20*time.Millisecond)
		defer cancel()
		_, err := j.Read(ctx, id.ID)
		return errors.Is(err, execstore.ErrOverloaded)
	}, 5*time.Second, time.Millisecond)
	once.Do(func() { close(release) })
	wg.Wait()
	assert.Positive(t, j.Stats().Overloaded)
}
