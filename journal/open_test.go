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

// Open refuses a missing cipher and retryable writes, and a standalone server unless the
// caller opts in; a replica set or a sharded cluster it accepts.
func TestOpenRefusesWeakSettings(t *testing.T) {
	opts := testOptions(t)
	_, err := Open(bg, server.URI, nil, opts)
	require.ErrorIs(t, err, execstore.ErrInvalid)

	_, err = Open(bg, server.URI+sep(server.URI)+"retryWrites=true", testRing, opts)
	require.ErrorIs(t, err, execstore.ErrInvalid)
	withRetries := opts
	withRetries.ClientOptions = options.Client().SetRetryWrites(true)
	_, err = Open(bg, server.URI, testRing, withRetries)
	require.ErrorIs(t, err, execstore.ErrInvalid)

	strict := opts
	strict.AcceptWeakDurability = false
	j, err := Open(bg, server.URI, testRing, strict)
	if standalone(t) {
		require.ErrorIs(t, err, execstore.ErrInvalid)
		assert.Contains(t, err.Error(), "standalone")
		return
	}
	require.NoError(t, err, "a server with majorities")
	require.NoError(t, j.Close(bg))
}

// standalone reports whether the test server is a standalone server, where w: "majority"
// means one node (the embedded server; MONGODB_URI may name a replica set or a router),
// asked of hello through a client of the test's own.
func standalone(t *testing.T) bool {
	t.Helper()
	client, err := mongo.Connect(options.Client().ApplyURI(server.URI))
	require.NoError(t, err)
	defer client.Disconnect(bg)
	var hello struct {
		SetName string `bson:"setName"`
		Msg     string `bson:"msg"`
	}
	require.NoError(t, client.Database("admin").RunCommand(bg, bson.D{{Key: "hello", Value: 1}}).Decode(&hello))
	return hello.SetName == "" && hello.Msg != "isdbgrid"
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
