package journal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
)

// Open refuses a missing cipher and retryable writes, and a server where w: "majority" can
// mean one node (a standalone server, a replica set of one) unless the caller opts in; a
// replica set of more or a sharded cluster it accepts.
func TestOpenRefusesWeakSettings(t *testing.T) {
	opts := testOptions(t)
	_, err := Open(bg, server.URI, nil, opts)
	require.ErrorIs(t, err, execstore.ErrInvalid)

	// A ring NewKeyRing refused (its error ignored) or a zero one: refused here, not by a
	// panic at the first checkpoint.
	short, ringErr := NewKeyRing(Key{ID: "k", Secret: []byte("too short")})
	require.Error(t, ringErr)
	for name, c := range map[string]Cipher{"typed nil ring": short, "zero ring": &KeyRing{}} {
		_, err = Open(bg, server.URI, c, opts)
		require.ErrorIs(t, err, execstore.ErrInvalid, name)
		assert.ErrorIs(t, err, ErrNoKeys, name)
	}

	_, err = Open(bg, server.URI+sep(server.URI)+"retryWrites=true", testRing, opts)
	require.ErrorIs(t, err, execstore.ErrInvalid)
	withRetries := opts
	withRetries.ClientOptions = options.Client().SetRetryWrites(true)
	_, err = Open(bg, server.URI, testRing, withRetries)
	require.ErrorIs(t, err, execstore.ErrInvalid)

	strict := opts
	strict.AcceptWeakDurability = false
	j, err := Open(bg, server.URI, testRing, strict)
	if weak := durableByHello(serverHello(t), false); weak != nil {
		require.ErrorIs(t, err, execstore.ErrInvalid)
		assert.Equal(t, weak.Error(), err.Error())
		return
	}
	require.NoError(t, err, "a server with majorities")
	require.NoError(t, j.Close(bg))
}

// serverHello returns the test server's hello reply (the embedded server is a standalone
// one; MONGODB_URI may name a replica set or a router), through a client of the test's own.
func serverHello(t *testing.T) bson.Raw {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(server.URI))
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
