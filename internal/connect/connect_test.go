package connect

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore"
)

// Errors name the hosts and never the password of the URI.
func TestRedaction(t *testing.T) {
	uri := "mongodb://alice:s3cr3t@db1:27017,db2:27018/?replicaSet=rs0"
	assert.Equal(t, "db1:27017,db2:27018", redactedHosts(uri))
	assert.Equal(t, "(unparsable URI)", redactedHosts("not a uri"))
	cause := errors.New("auth failed for mongodb://alice:s3cr3t@db1:27017")
	err := redactErr(cause, uri)
	assert.NotContains(t, err.Error(), "s3cr3t")
	assert.ErrorIs(t, err, cause)
	bad := "mongo://alice:pw@x"
	assert.NotContains(t, redactErr(errors.New("bad "+bad), bad).Error(), "pw@")
	assert.Equal(t, cause, redactErr(cause, "mongodb://db1:27017"), "nothing to hide")
}

// An unacknowledged write concern given as the store's own is refused before any I/O.
func TestCheckWriteConcern(t *testing.T) {
	assert.NoError(t, CheckWriteConcern(nil))
	assert.NoError(t, CheckWriteConcern(writeconcern.Majority()))
	assert.ErrorIs(t, CheckWriteConcern(writeconcern.Unacknowledged()), execstore.ErrInvalid)
}
