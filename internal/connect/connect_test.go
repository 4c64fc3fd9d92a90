package connect

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore"
)

// Errors name the hosts and never the password of the URI, however the URI is written, and a
// URI without a password (the empty one included) changes no text.
func TestRedaction(t *testing.T) {
	uri := "mongodb://alice:s3cr3t@db1:27017,db2:27018/?replicaSet=rs0"
	assert.Equal(t, "db1:27017,db2:27018", redactedHosts(uri))
	assert.Equal(t, "(unparsable URI)", redactedHosts("not a uri"))
	assert.Equal(t, "(unparsable URI)", redactedHosts(""))
	cause := errors.New("auth failed for mongodb://alice:s3cr3t@db1:27017")
	err := redactErr(cause, uri)
	assert.NotContains(t, err.Error(), "s3cr3t")
	assert.Contains(t, err.Error(), "mongodb://alice:xxxxx@db1:27017")
	assert.ErrorIs(t, err, cause)
	bad := "mongo://alice:pw@x"
	assert.NotContains(t, redactErr(errors.New("bad "+bad), bad).Error(), "pw@")

	encoded := "mongodb://bob:p%40ss%3Aword@db1/"
	msg := redactErr(errors.New("quoted p%40ss%3Aword and decoded p@ss:word"), encoded).Error()
	assert.Equal(t, "quoted xxxxx and decoded xxxxx", msg)

	for _, plain := range []string{"", "mongodb://db1:27017", "mongodb://alice@db1", "not a uri", "mongodb://alice:@db1"} {
		text := "error parsing uri: scheme must be \"mongodb\" or \"mongodb+srv\""
		assert.Equal(t, cause, redactErr(cause, plain), "nothing to hide in %q", plain)
		assert.Equal(t, text, redactText(text, plain), "nothing to hide in %q", plain)
	}
	assert.NoError(t, redactErr(nil, uri))
}

// An unacknowledged write concern given as the store's own is refused before any I/O.
func TestCheckWriteConcern(t *testing.T) {
	assert.NoError(t, CheckWriteConcern(nil))
	assert.NoError(t, CheckWriteConcern(writeconcern.Majority()))
	assert.ErrorIs(t, CheckWriteConcern(writeconcern.Unacknowledged()), execstore.ErrInvalid)
}

// A URI the driver cannot connect with is an *execstore.InvalidError for "uri" that says what
// a URI looks like, and never quotes a password.
func TestCheckURI(t *testing.T) {
	for _, uri := range []string{"", "  ", "not-a-uri", "http://db1:27017/", "mongodb://", "mongodb:///db",
		"mongo://alice:s3cr3t@db1", "mongodb://alice:s3cr3t@db1:notaport/", "mongodb://db1/?w=-1&wtimeoutMS=x"} {
		err := CheckURI(uri)
		var ie *execstore.InvalidError
		if assert.ErrorAs(t, err, &ie, "%q", uri) {
			assert.Equal(t, "uri", ie.Field)
			assert.ErrorIs(t, err, execstore.ErrInvalid)
			assert.Contains(t, err.Error(), "mongodb://host:27017/", "%q: says what a URI looks like", uri)
			assert.NotContains(t, err.Error(), "s3cr3t")
			assert.NotContains(t, err.Error(), "(uri)")
		}
	}
	for _, uri := range []string{"mongodb://localhost:27017/", "mongodb://alice:s3cr3t@db1,db2/?replicaSet=rs0", "mongodb://db1"} {
		assert.NoError(t, CheckURI(uri), uri)
	}
}

// Database and collection names MongoDB refuses are refused, naming the field; the names it
// takes pass.
func TestNames(t *testing.T) {
	for _, name := range []string{"", "bad.name", "with space", "a/b", `a\b`, "$x", `a"b`, "a*b", "a<b", "a>b",
		"a:b", "a|b", "a?b", "a\x00b", strings.Repeat("d", 64), strings.Repeat("d", 100)} {
		err := CheckDatabaseName("Connection.Database", name)
		var ie *execstore.InvalidError
		if assert.ErrorAs(t, err, &ie, "%q", name) {
			assert.Equal(t, "Connection.Database", ie.Field)
		}
	}
	for _, name := range []string{"execstore", "orders_2026", "a-b", "Ünïcode", strings.Repeat("d", 63)} {
		assert.NoError(t, CheckDatabaseName("Connection.Database", name), name)
	}
	for _, name := range []string{"", "$x", "a$b", "a\x00b", "system.users", "x.system.y", ".x", strings.Repeat("c", 246)} {
		err := CheckCollectionName("Connection.Collection", "execstore", name)
		var ie *execstore.InvalidError
		if assert.ErrorAs(t, err, &ie, "%q", name) {
			assert.Equal(t, "Connection.Collection", ie.Field)
		}
	}
	for _, name := range []string{"executions", "with space", "a.b", "systems", strings.Repeat("c", 245)} {
		assert.NoError(t, CheckCollectionName("Connection.Collection", "execstore", name), name)
	}
}
