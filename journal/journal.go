package journal

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

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
	"github.com/execstore/execstore/internal/counters"
	"github.com/execstore/execstore/internal/outcome"
	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/unique"
	"github.com/execstore/execstore/internal/workers"
	"github.com/execstore/execstore/server"
)

// Journal is the operation journal. Every method is safe for concurrent use.
type Journal struct {
	client    *mongo.Client
	coll      *mongo.Collection
	cipher    Cipher
	pool      workers.Runner
	stats     *counters.Ops
	tel       *telemetry.Telemetry // nil: no-op providers
	opts      Options
	uncertain uncertainty

	retentionDeleted atomic.Int64    // invocations DeleteExpired deleted (Stats)
	retained         retainedCounter // execstore.retention.deleted
	stopRetention    func()          // stops the retention's goroutine and waits for it
}

// writeConcern is the only write concern the journal writes with: acknowledged by a
// majority, each member having written it to its journal.
func writeConcern() *writeconcern.WriteConcern {
	journaled := true
	return &writeconcern.WriteConcern{W: writeconcern.WCMajority, Journal: &journaled}
}

// Open connects to the server at uri with a client of the journal's own and returns the
// journal, sealing payloads with cipher. It refuses (execstore.ErrInvalid), before any I/O,
// a cipher that cannot seal and open (nil; a KeyRing NewKeyRing did not make, matching
// ErrNoKeys too; any Cipher that fails to seal and open a probe of a few bytes, or opens it
// under other associated data) and a URI or ClientOptions asking for retryable writes; and,
// unless Options.AcceptWeakDurability, a deployment where w: "majority" may mean one node:
// a standalone server, or a replica set whose hello lists fewer than two voting
// data-bearing members (its hosts; arbiters hold no data, and hello cannot show whether a
// passive or hidden member votes). A mongos is accepted. It refuses, before any I/O and
// with an *execstore.InvalidError naming the field, a URI the driver cannot connect with
// ("uri") and a setting it cannot honour (see Options). It pings the server, retrying with
// backoff until ctx ends or, when ctx has no deadline, for Connection.ConnectTimeout (30s by
// default), which bounds the whole of Open; the error then says what answered
// (server.ErrConnectionRefused and the errors beside it). It refuses (ErrInvalid) a server
// older than MongoDB 4.4, as every store of the module does. It creates IndexFinished, the
// retention's index (one createIndexes; nothing changes when it exists), and starts the
// retention when Options.Retention is set.
func Open(ctx context.Context, uri string, cipher Cipher, opts Options) (*Journal, error) {
	if err := opts.check(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	if err := checkCipher(cipher); err != nil {
		return nil, err
	}
	if r := options.Client().ApplyURI(uri).RetryWrites; r != nil && *r {
		return nil, contract.Invalid("URI", "asks for retryable writes; the journal never retries a write blindly: drop retryWrites=true")
	}
	client := options.Client().SetRetryWrites(false)
	if opts.ClientOptions != nil {
		if r := opts.ClientOptions.RetryWrites; r != nil && *r {
			return nil, contract.Invalid("Connection.ClientOptions", "asks for retryable writes; the journal never retries a write blindly")
		}
		client = options.MergeClientOptions(opts.ClientOptions, client)
	}
	stats := counters.New(opNames...)
	cfg := connect.Config{ClientOptions: client, Commands: &stats.Commands, PingInterval: opts.PingInterval,
		ConnectTimeout: opts.ConnectTimeout, WriteConcern: writeConcern()}
	return connect.Open(ctx, uri, cfg, func(ctx context.Context, client *mongo.Client, _ bool) (*Journal, error) {
		return open(ctx, client, cipher, opts, stats)
	})
}

func open(ctx context.Context, client *mongo.Client, cipher Cipher, opts Options, stats *counters.Ops) (*Journal, error) {
	// The server is identified as every store identifies it: a server older than MongoDB 4.4
	// is refused with ErrInvalid. The journal's formulation is one for every server.
	if _, err := connect.Identify(ctx, client, connect.Detect); err != nil {
		return nil, connect.Refused(opts.Logger, "journal", err)
	}
	if err := checkDurable(ctx, client, opts.AcceptWeakDurability); err != nil {
		return nil, connect.Refused(opts.Logger, "journal", err)
	}
	stats.Log(opts.Logger, "journal")
	db, err := connect.Database(ctx, client, opts.Database, writeConcern(), readconcern.Majority(), false, opts.Collection)
	if err != nil {
		return nil, err
	}
	coll := db.Collection(opts.Collection, options.Collection().SetReadPreference(readpref.Primary()))
	if err := ensureIndex(ctx, coll); err != nil {
		return nil, err
	}
	j := &Journal{client: client, cipher: cipher, opts: opts, stats: stats, coll: coll}
	j.pool = workers.RunnerFor(opts.Pool, workers.Config{Workers: opts.Workers, QueueDepth: opts.QueueDepth})
	j.tel = telemetry.New("journal", opts.Database, opts.Collection, opts.TracerProvider, opts.MeterProvider, j.pool)
	j.retained = newRetainedCounter(j.tel.Meter(), opts.Database, opts.Collection)
	j.stopRetention = func() {}
	if opts.Retention > 0 {
		runs, cancel := context.WithCancel(context.Background())
		stop, done := make(chan struct{}), make(chan struct{})
		go func() {
			defer close(done)
			j.retainLoop(runs, stop)
		}()
		j.stopRetention = sync.OnceFunc(func() {
			close(stop)
			cancel()
			<-done
		})
	}
	return j, nil
}

// Close stops the retention (Options.Retention), ending the run in flight, stops accepting
// calls (execstore.ErrClosed), drains queued and in-flight operations within ctx and
// disconnects the journal's client.
func (j *Journal) Close(ctx context.Context) error {
	j.stopRetention()
	err := j.pool.Close(ctx)
	if derr := j.client.Disconnect(ctx); derr != nil && err == nil && !errors.Is(derr, mongo.ErrClientDisconnected) {
		err = derr
	}
	return err
}

// opNames are the journal's operations, as Stats counts them.
var opNames = []string{"claim", "has_invocation", "verify_owner", "read", "dispatch", "checkpoint",
	"prepare", "reconcile", "reverify", "delete_expired", "retention_totals"}

// Stats are the journal's counters.
type Stats struct {
	// Stats holds the queue, the operations by name (claim, has_invocation, verify_owner,
	// read, dispatch, checkpoint, prepare, reconcile, reverify, delete_expired,
	// retention_totals), the unknown outcomes, the calls shed for load and the server
	// commands.
	server.Stats
	// RetentionDeleted counts the invocations this Journal deleted for their retention
	// (DeleteExpired, the runs of Options.Retention included).
	RetentionDeleted int64
}

// Stats returns the journal's counters.
func (j *Journal) Stats() Stats {
	return Stats{Stats: j.stats.Stats(j.pool), RetentionDeleted: j.retentionDeleted.Load()}
}

// submit runs fn as an operation op on invocation id on the journal's pool and waits for it,
// with the context rules of package async, in a span of its own.
func submit[T any](ctx context.Context, j *Journal, op, id string, fn func(ctx context.Context) (T, error)) (T, error) {
	r := async.NewRequest(j.stats, j.stats.Kind(op), fn)
	if j.tel != nil {
		var span telemetry.Span
		ctx, span = j.tel.Start(ctx, op, id)
		r.OnSettled(span.End)
	}
	return r.Submit(ctx, j.pool, j.opts.ShedLoad).Wait(ctx)
}

// load reads invocation id with read concern majority from the primary; nil when absent.
// A document that does not decode is an *IntegrityError. A read that fails is the read's
// error (a context error as is): for reads whose failure leaves the caller nothing to act
// on (Read, HasInvocation, Claim's read after a refused insert, Dispatch's read before its
// write).
func (j *Journal) load(ctx context.Context, op, id string) (*document, error) {
	raw, err := j.find(ctx, id)
	if err != nil {
		return nil, outcome.ReadFailureOf(outcome.NounInvocation, op, id, err)
	}
	return decode(id, raw)
}

// loadDeciding is load for a read whose answer decides the caller's next step (VerifyOwner,
// Reverify, the read after a guarded write matched nothing). It fails closed: a read that
// fails (a cut connection, a timeout, the context ending while it runs) is an
// *execstore.OutcomeUnknownError for op, its cause prefixed with note when there is one, and
// makes the journal uncertain about id until Reverify succeeds. A document refused on
// decoding is an answer (*IntegrityError) and changes nothing.
func (j *Journal) loadDeciding(ctx context.Context, op, id, note string) (*document, error) {
	raw, err := j.find(ctx, id)
	if err != nil {
		j.uncertain.add(id)
		if note != "" {
			err = fmt.Errorf("%s: %w", note, err)
		}
		return nil, &execstore.OutcomeUnknownError{Op: op, ExecutionID: id, Noun: outcome.NounInvocation, Err: err}
	}
	return decode(id, raw)
}

// find returns invocation id's stored document as a majority read from the primary finds
// it; nil when absent.
func (j *Journal) find(ctx context.Context, id string) (bson.Raw, error) {
	raw, err := j.coll.FindOne(ctx, bson.D{{Key: fID, Value: id}}).Raw()
	if errors.Is(err, mongo.ErrNoDocuments) {
		return nil, nil
	}
	return raw, err
}

// decode decodes a stored document; nil for nil. What does not decode is an
// *IntegrityError.
func decode(id string, raw bson.Raw) (*document, error) {
	if raw == nil {
		return nil, nil
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
	err = outcome.WriteFailureOf(outcome.NounInvocation, op, id, err)
	if errors.Is(err, execstore.ErrOutcomeUnknown) {
		j.uncertain.add(id)
	}
	return err
}

// explain says why a guarded write of f matched nothing (nothing was written), from a
// majority read that fails closed (loadDeciding): the invocation is gone, or f no longer
// holds it (*OwnerConflictError), or the document is refused on read (*IntegrityError:
// altered ciphertexts, or attempt flags its receipts contradict), or else whatever state
// says. When the fence holds and state finds nothing either, the guard missed a document
// the journal's own writes cannot have made (each of them moves the revision): that is an
// *IntegrityError too, never a conflict whose expected and found are the same.
func (j *Journal) explain(ctx context.Context, op string, f Fence, state func(d *document) error) error {
	d, err := j.loadDeciding(ctx, op, f.InvocationID, "the guarded write matched nothing, and reading why failed")
	if err != nil {
		return err
	}
	if d == nil {
		return &notFoundError{op: op, id: f.InvocationID}
	}
	if err := holds(f, d); err != nil {
		return err
	}
	if _, err := d.open(j.cipher); err != nil {
		return err
	}
	if err := state(d); err != nil {
		return err
	}
	return &IntegrityError{InvocationID: f.InvocationID, What: "document",
		Err: fmt.Errorf("the %s guarded by the fence matched nothing although the stored document allows it: it was changed outside the journal", op)}
}

// holds returns nil when f holds d exactly (owner, claim, revision), an
// *OwnerConflictError otherwise.
func holds(f Fence, d *document) error {
	if d.Owner != f.Owner || d.Claim != f.claim || d.Rev != f.Revision {
		return &OwnerConflictError{InvocationID: f.InvocationID, ExpectedOwner: f.Owner, FoundOwner: d.Owner,
			ExpectedRevision: f.Revision, FoundRevision: d.Rev}
	}
	return nil
}

// next is f after one more write.
func next(f Fence) Fence {
	f.Revision++
	return f
}
