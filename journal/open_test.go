package journal

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
)

// Open refuses a missing cipher and retryable writes, and a standalone server unless the
// caller opts in.
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

	if server.External {
		t.Skip("the external server may be a replica set")
	}
	strict := opts
	strict.AcceptWeakDurability = false
	_, err = Open(bg, server.URI, testRing, strict)
	require.ErrorIs(t, err, execstore.ErrInvalid)
	assert.Contains(t, err.Error(), "standalone")
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
