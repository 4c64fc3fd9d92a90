// Package connect is the one way every store of the module opens its MongoDB connection:
// the settings refused before any I/O (CheckURI, CheckConnection); a client from a URI and the
// caller's client options, with a command monitor that counts commands; a ping retried with
// exponential backoff until Open's context ends (bounded by ConnectTimeout when the caller's
// has no deadline), whose error says what answered; what the
// server is (MongoDB, FerretDB 1.x, FerretDB 2.x or another server on the DocumentDB engine),
// the probes of what it serves and the profile they call for (Choose), and the refusal of a
// server older than MongoDB 4.4;
// the database handle with the store's write and read concerns; and the refusal of an
// unacknowledged write concern, wherever it comes from.
//
// Errors name the server's address, never the credentials in the URI.
package connect

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"

	"github.com/execstore/execstore/internal/contract"
)

// Config is how Dial connects.
type Config struct {
	// ClientOptions are applied after the URI; a command monitor set here is chained after
	// the counting one.
	ClientOptions *options.ClientOptions
	// Commands, when set, is incremented for every command the client sends.
	Commands *atomic.Int64
	// PingInterval is the first pause between connection attempts; pauses grow
	// exponentially up to 5s until the context ends.
	PingInterval time.Duration
	// ConnectTimeout bounds Open and OpenClient when their context has no deadline; 0 is
	// Connection.ConnectTimeout's default.
	ConnectTimeout time.Duration
	// WriteConcern is the store's own write concern; when nil, the client's (the URI's or
	// ClientOptions') must be acknowledged.
	WriteConcern *writeconcern.WriteConcern
	// Profile is the store's Connection.Profile: one of the profiles, refused otherwise.
	Profile Profile
}

// Dial connects to the server at uri and pings it, retrying until ctx ends, so a process
// started beside its database waits for it instead of failing. Its error names the address
// and why it gave up (see Ping), never the URI's credentials.
func Dial(ctx context.Context, uri string, cfg Config) (*mongo.Client, error) {
	addr := redactedHosts(uri)
	copts := options.Client().ApplyURI(uri)
	var user *event.CommandMonitor
	if cfg.ClientOptions != nil {
		user = cfg.ClientOptions.Monitor
		copts = options.MergeClientOptions(copts, cfg.ClientOptions)
	}
	if cfg.Commands != nil {
		copts.SetMonitor(countingMonitor(cfg.Commands, user))
	}
	if err := CheckWriteConcern(cfg.WriteConcern); err != nil {
		return nil, err
	}
	if cfg.WriteConcern == nil && copts.WriteConcern != nil && !copts.WriteConcern.Acknowledged() {
		return nil, errUnacknowledged("write concern", "the URI's or Connection.ClientOptions' write concern")
	}
	client, err := mongo.Connect(copts)
	if err != nil {
		return nil, fmt.Errorf("execstore: connecting to %s: %w", addr, redactErr(err, uri))
	}
	if err := Ping(ctx, client, cfg.PingInterval); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("execstore: server at %s not reachable: %w", addr, redactErr(err, uri))
	}
	return client, nil
}

// Database returns the database name of client with the store's write and read concerns
// (nil keeps the client's). When the store has no write concern of its own and did not make
// the client (so cannot know its write concern), it asks the server whether writes are
// acknowledged, with one update that matches nothing in probe.
func Database(ctx context.Context, client *mongo.Client, name string, wc *writeconcern.WriteConcern,
	rc *readconcern.ReadConcern, askServer bool, probe string) (*mongo.Database, error) {
	if err := CheckWriteConcern(wc); err != nil {
		return nil, err
	}
	dbOpts := options.Database()
	if wc != nil {
		dbOpts.SetWriteConcern(wc)
	}
	if rc != nil {
		dbOpts.SetReadConcern(rc)
	}
	db := client.Database(name, dbOpts)
	if askServer && wc == nil {
		if err := checkAcknowledged(ctx, db.Collection(probe)); err != nil {
			return nil, err
		}
	}
	return db, nil
}

// CheckWriteConcern refuses an unacknowledged write concern given as a store option.
func CheckWriteConcern(wc *writeconcern.WriteConcern) error {
	if wc != nil && !wc.Acknowledged() {
		return errUnacknowledged("Connection.WriteConcern", "Connection.WriteConcern")
	}
	return nil
}

// checkAcknowledged asks the server whether writes through coll are acknowledged, with the
// write concern they will actually be sent with (the driver cannot say which one a collection
// inherited from its client): one update that matches no document.
func checkAcknowledged(ctx context.Context, coll *mongo.Collection) error {
	res, err := coll.UpdateOne(ctx, bson.D{{Key: "_id", Value: probeID}},
		bson.D{{Key: "$unset", Value: bson.D{{Key: "probe", Value: ""}}}})
	if err != nil {
		return fmt.Errorf("execstore: checking the write concern: %w", err)
	}
	if !res.Acknowledged {
		return errUnacknowledged("write concern", "the client's write concern")
	}
	return nil
}

// probeID is the _id checkAcknowledged's update looks for; no document has it.
const probeID = "execstore write concern probe"

// errUnacknowledged refuses a store whose writes would not be acknowledged: every write's
// outcome would be unknown, and no guard could tell a conflict from a write that has not
// landed yet.
func errUnacknowledged(field, source string) error {
	return contract.Invalid(field, "%s is unacknowledged (w: 0); a store needs acknowledged writes: "+
		"set w to 1 or more, or \"majority\" (for example Options.WriteConcern = writeconcern.Majority())", source)
}

func countingMonitor(n *atomic.Int64, user *event.CommandMonitor) *event.CommandMonitor {
	m := &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			n.Add(1)
			if user != nil && user.Started != nil {
				user.Started(ctx, e)
			}
		},
	}
	if user != nil {
		m.Succeeded, m.Failed = user.Succeeded, user.Failed
	}
	return m
}

// Builder builds a store on client, within ctx (Open's, bounded by ConnectTimeout when the
// caller's has no deadline). owns is whether the store made the client and disconnects it at
// Close.
type Builder[S any] func(ctx context.Context, client *mongo.Client, owns bool) (S, error)

// Open is a store's Open: it refuses a URI the driver cannot connect with, dials uri with
// cfg, then builds the store on the client with build. All of it runs within
// cfg.ConnectTimeout when ctx has no deadline. If build fails, the client is disconnected.
func Open[S any](ctx context.Context, uri string, cfg Config, build Builder[S]) (S, error) {
	var zero S
	if err := checkProfile(cfg.Profile); err != nil {
		return zero, err
	}
	if err := CheckURI(uri); err != nil {
		return zero, err
	}
	ctx, cancel, bound := bounded(ctx, cfg.connectTimeout())
	defer cancel()
	client, err := Dial(ctx, uri, cfg)
	if err != nil {
		return zero, cfg.gaveUp(ctx, bound, err)
	}
	s, err := build(ctx, client, true)
	if err != nil {
		_ = client.Disconnect(context.Background())
		return zero, cfg.gaveUp(ctx, bound, err)
	}
	return s, nil
}

// OpenClient is a store's OpenClient: it checks the store's own write concern, pings client
// with backoff, then builds the store on it (owns is false: the client stays the caller's).
// The ping and build run within cfg.ConnectTimeout when ctx has no deadline.
func OpenClient[S any](ctx context.Context, client *mongo.Client, cfg Config, build Builder[S]) (S, error) {
	var zero S
	if err := checkProfile(cfg.Profile); err != nil {
		return zero, err
	}
	if err := CheckWriteConcern(cfg.WriteConcern); err != nil {
		return zero, err
	}
	ctx, cancel, bound := bounded(ctx, cfg.connectTimeout())
	defer cancel()
	if err := Ping(ctx, client, cfg.PingInterval); err != nil {
		return zero, cfg.gaveUp(ctx, bound, fmt.Errorf("execstore: server%s not reachable: %w", at(err), err))
	}
	s, err := build(ctx, client, false)
	if err != nil {
		return zero, cfg.gaveUp(ctx, bound, err)
	}
	return s, nil
}

// connectTimeout is cfg.ConnectTimeout, or its default when unset.
func (cfg Config) connectTimeout() time.Duration {
	if cfg.ConnectTimeout > 0 {
		return cfg.ConnectTimeout
	}
	return defaultConnectTimeout
}

// gaveUp adds to err, when Open's own bound ended ctx, that ConnectTimeout did.
func (cfg Config) gaveUp(ctx context.Context, bound bool, err error) error {
	if bound && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w (Open gave up after Connection.ConnectTimeout, %v, its context having no deadline)", err, cfg.connectTimeout())
	}
	return err
}

// at names the addresses a failed ping tried, as " at host:port,…", or "" when its error
// does not say.
func at(err error) string {
	var sel topology.ServerSelectionError
	if !errors.As(err, &sel) || len(sel.Desc.Servers) == 0 {
		return ""
	}
	addrs := make([]string, len(sel.Desc.Servers))
	for i, s := range sel.Desc.Servers {
		addrs[i] = s.Addr.String()
	}
	return " at " + strings.Join(addrs, ",")
}
