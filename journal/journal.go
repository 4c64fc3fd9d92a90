package journal

import (
	"context"
	"errors"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/mongo/readconcern"
	"go.mongodb.org/mongo-driver/v2/mongo/readpref"
	"go.mongodb.org/mongo-driver/v2/mongo/writeconcern"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/async"
	"github.com/execstore/execstore/internal/connect"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/internal/unique"
	"github.com/execstore/execstore/pool"
)

// Journal is the operation journal. Every method is safe for concurrent use.
type Journal struct {
	client    *mongo.Client
	coll      *mongo.Collection
	cipher    Cipher
	pool      pool.Runner
	opts      Options
	uncertain uncertainty
}

// writeConcern is the only write concern the journal writes with: acknowledged by a
// majority, each member having written it to its journal.
func writeConcern() *writeconcern.WriteConcern {
	journaled := true
	return &writeconcern.WriteConcern{W: writeconcern.WCMajority, Journal: &journaled}
}

// Open connects to the server at uri with a client of the journal's own and returns the
// journal, sealing payloads with cipher. It refuses (execstore.ErrInvalid) a nil cipher,
// a URI or ClientOptions asking for retryable writes, and, unless
// Options.AcceptWeakDurability, a server that is not a replica set or a sharded cluster.
// It pings the server, retrying with backoff until ctx ends.
func Open(ctx context.Context, uri string, cipher Cipher, opts Options) (*Journal, error) {
	opts = opts.withDefaults()
	if cipher == nil {
		return nil, contract.Invalid("cipher", "must not be nil: the journal stores nothing in plaintext")
	}
	if r := options.Client().ApplyURI(uri).RetryWrites; r != nil && *r {
		return nil, contract.Invalid("URI", "asks for retryable writes; the journal never retries a write blindly: drop retryWrites=true")
	}
	client := options.Client().SetRetryWrites(false)
	if opts.ClientOptions != nil {
		if r := opts.ClientOptions.RetryWrites; r != nil && *r {
			return nil, contract.Invalid("Options.ClientOptions", "asks for retryable writes; the journal never retries a write blindly")
		}
		client = options.MergeClientOptions(opts.ClientOptions, client)
	}
	cfg := connect.Config{ClientOptions: client, PingInterval: opts.PingInterval, WriteConcern: writeConcern()}
	return connect.Open(ctx, uri, cfg, func(client *mongo.Client, _ bool) (*Journal, error) {
		return open(ctx, client, cipher, opts)
	})
}

func open(ctx context.Context, client *mongo.Client, cipher Cipher, opts Options) (*Journal, error) {
	if err := checkDurable(ctx, client, opts.AcceptWeakDurability); err != nil {
		return nil, err
	}
	db, err := connect.Database(ctx, client, opts.Database, writeConcern(), readconcern.Majority(), false, opts.Collection)
	if err != nil {
		return nil, err
	}
	j := &Journal{client: client, cipher: cipher, opts: opts,
		coll: db.Collection(opts.Collection, options.Collection().SetReadPreference(readpref.Primary()))}
	j.pool = pool.NewRunner(opts.Pool, pool.Config{Workers: opts.Workers, QueueDepth: opts.QueueDepth})
	return j, nil
}

// checkDurable refuses a server on which "majority" means one node, unless accepted: hello
// names a replica set (setName) or a mongos (msg "isdbgrid") on servers that have majorities.
func checkDurable(ctx context.Context, client *mongo.Client, accept bool) error {
	var hello struct {
		SetName string `bson:"setName"`
		Msg     string `bson:"msg"`
	}
	if err := client.Database("admin").RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&hello); err != nil {
		return fmt.Errorf("journal: asking the server what it is: %w", err)
	}
	if hello.SetName == "" && hello.Msg != "isdbgrid" && !accept {
		return contract.Invalid("server", "is a standalone server: w: \"majority\" would mean one node; "+
			"use a replica set, or set Options.AcceptWeakDurability to accept it")
	}
	return nil
}

// Close stops accepting calls (execstore.ErrClosed), drains queued and in-flight
// operations within ctx and disconnects the journal's client.
func (j *Journal) Close(ctx context.Context) error {
	err := j.pool.Close(ctx)
	if derr := j.client.Disconnect(ctx); derr != nil && err == nil && !errors.Is(derr, mongo.ErrClientDisconnected) {
		err = derr
	}
	return err
}

// discard is the async.Recorder of a journal: it keeps no statistics.
type discard struct{}

func (discard) Record(int, error) {}

// submit runs fn on the journal's pool and waits for it, with the context rules of
// package async.
func submit[T any](ctx context.Context, j *Journal, fn func(ctx context.Context) (T, error)) (T, error) {
	return async.NewRequest(discard{}, 0, fn).Submit(ctx, j.pool, false).Wait(ctx)
}

// load reads invocation id with read concern majority from the primary; nil when absent.
// A document that does not decode is an *IntegrityError.
func (j *Journal) load(ctx context.Context, op, id string) (*document, error) {
	raw, err := j.coll.FindOne(ctx, bson.D{{Key: fID, Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	if err != nil {
		return nil, outcome.ReadFailure(op, id, err)
	}
	var d document
	if err := bson.Unmarshal(raw, &d); err != nil {
		return nil, &IntegrityError{InvocationID: id, What: "document", Err: err}
	}
	return &d, nil
}

// write runs one write of invocation id within the write timeout and classifies its error:
// an unknown outcome makes the journal uncertain about id.
func (j *Journal) write(ctx context.Context, op, id string, w func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, j.opts.WriteTimeout)
	defer cancel()
	err := w(ctx)
	if err == nil || errors.Is(err, mongo.ErrNoDocuments) || unique.IsDuplicateKey(err) {
		return err
	}
	err = outcome.WriteFailure(op, id, err)
	if errors.Is(err, execstore.ErrOutcomeUnknown) {
		j.uncertain.add(id)
	}
	return err
}

// explain says why a guarded write of f matched nothing, from a majority read: the
// invocation is gone, or f no longer holds it (*OwnerConflictError), or else whatever state
// says (nil from state: the write raced with another change; a conflict at f's revision).
func (j *Journal) explain(ctx context.Context, op string, f Fence, state func(d *document) error) error {
	d, err := j.load(ctx, op, f.InvocationID)
	if err != nil {
		return err
	}
	if d == nil {
		return fmt.Errorf("journal: %s of invocation %q: %w", op, f.InvocationID, execstore.ErrNotFound)
	}
	if d.Owner != f.Owner || d.Claim != f.claim || d.Rev != f.Revision {
		return &OwnerConflictError{InvocationID: f.InvocationID, ExpectedOwner: f.Owner, FoundOwner: d.Owner,
			ExpectedRevision: f.Revision, FoundRevision: d.Rev}
	}
	if err := state(d); err != nil {
		return err
	}
	return &OwnerConflictError{InvocationID: f.InvocationID, ExpectedOwner: f.Owner, FoundOwner: d.Owner,
		ExpectedRevision: f.Revision, FoundRevision: d.Rev}
}

// next is f after one more write.
func next(f Fence) Fence {
	f.Revision++
	return f
}
