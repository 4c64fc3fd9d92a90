package connect

import (
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/server"
)

// uriShape is what a refused URI is told to look like.
const uriShape = "a URI looks like mongodb://host:27017/ or mongodb+srv://cluster.example.net/"

// CheckURI refuses, with an *execstore.InvalidError for field "uri", a URI the driver cannot
// connect with: empty (an unset environment variable gives one), unparsable, or naming no
// host. The error never quotes the URI's password. A mongodb+srv URI is parsed as the driver
// parses it, which looks up its DNS records.
func CheckURI(uri string) error {
	if strings.TrimSpace(uri) == "" {
		return contract.Invalid("uri", "is empty: %s (is the variable it comes from set?)", uriShape)
	}
	cs, err := connstring.ParseAndValidate(uri)
	if err != nil {
		return contract.Invalid("uri", "is not a MongoDB connection string (%s): %s", redactText(err.Error(), uri), uriShape)
	}
	if len(cs.Hosts) == 0 {
		return contract.Invalid("uri", "names no host: %s", uriShape)
	}
	return nil
}

// CheckConnection refuses, before any I/O and with an *execstore.InvalidError naming the
// field, a Connection a store cannot honour: a negative count or duration (zero means the
// default), Workers or QueueDepth set beside a shared Pool (whose own settings apply),
// ClientOptions the driver refuses, an unacknowledged write concern, a read concern level
// MongoDB does not know, a profile that is none of package server's, and
// database or collection names the server would refuse. collection is the store's default
// collection, which the names are checked with when Collection is empty.
func CheckConnection(c server.Connection, collection string) error {
	for _, n := range []struct {
		field string
		value int
	}{{"Connection.Workers", c.Workers}, {"Connection.QueueDepth", c.QueueDepth}} {
		if err := NotNegative(n.field, n.value); err != nil {
			return err
		}
	}
	for _, d := range []struct {
		field string
		value time.Duration
	}{
		{"Connection.PingInterval", c.PingInterval},
		{"Connection.ConnectTimeout", c.ConnectTimeout},
		{"Connection.SettleTimeout", c.SettleTimeout},
	} {
		if err := NotNegativeDuration(d.field, d.value); err != nil {
			return err
		}
	}
	if c.Pool != nil {
		if c.Workers != 0 {
			return contract.Invalid("Connection.Workers", "is the shared Pool's (pool.Config.Workers) when Connection.Pool is set; leave it 0")
		}
		if c.QueueDepth != 0 {
			return contract.Invalid("Connection.QueueDepth", "is the shared Pool's (pool.Config.QueueDepth) when Connection.Pool is set; leave it 0")
		}
	}
	if c.ClientOptions != nil {
		if err := c.ClientOptions.Validate(); err != nil {
			return contract.Invalid("Connection.ClientOptions", "are not valid: %v", err)
		}
	}
	if err := checkProfile(c.Profile); err != nil {
		return err
	}
	if err := CheckWriteConcern(c.WriteConcern); err != nil {
		return err
	}
	if err := checkReadConcern(c.ReadConcern); err != nil {
		return err
	}
	c = Defaults(c, collection)
	if err := CheckDatabaseName("Connection.Database", c.Database); err != nil {
		return err
	}
	return CheckCollectionName("Connection.Collection", c.Database, c.Collection)
}

// NotNegative refuses a negative count of field; zero means its default.
func NotNegative[N int | int64](field string, n N) error {
	if n < 0 {
		return contract.Invalid(field, "must not be negative (0 means the default), got %d", n)
	}
	return nil
}

// NotNegativeDuration refuses a negative duration of field; zero means its default.
func NotNegativeDuration(field string, d time.Duration) error {
	if d < 0 {
		return contract.Invalid(field, "must not be negative (0 means the default), got %v", d)
	}
	return nil
}

// checkProfile refuses a profile that is none of package server's.
func checkProfile(p Profile) error {
	switch p {
	case Detect, MongoDB, FerretDB:
		return nil
	}
	return contract.Invalid("Connection.Profile", "%q is not a profile: leave it empty (detect), or use server.MongoDB or server.FerretDB", string(p))
}

// checkReadConcern refuses a read concern whose level MongoDB does not know; an empty level
// is the server's default.
func checkReadConcern(rc *readconcern.ReadConcern) error {
	if rc == nil {
		return nil
	}
	switch rc.Level {
	case "", "local", "available", "majority", "linearizable", "snapshot":
		return nil
	}
	return contract.Invalid("Connection.ReadConcern", "level %q is not one of MongoDB's: local, available, majority, linearizable, snapshot", rc.Level)
}

// CheckClientConnection refuses what OpenClient cannot honour beyond what CheckConnection
// refuses: ClientOptions, since the client is made already.
func CheckClientConnection(c server.Connection) error {
	if c.ClientOptions != nil {
		return contract.Invalid("Connection.ClientOptions", "apply to a client Open makes; OpenClient's client is made already: set them on it, and leave these nil")
	}
	return nil
}
