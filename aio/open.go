package aio

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cenkalti/backoff/v4"
	"go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/connstring"

	"github.com/execstore/execstore/batch"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/pool"
)

// Store is the asynchronous execution store. It implements execstore.Store; every method is
// safe for concurrent use.
type Store struct {
	client     *mongo.Client
	ownsClient bool
	env        ops.Env
	info       ServerInfo
	pool       *pool.Pool
	group      *batch.Coalescer[*commitItem] // nil when group commit is off
	writes     *batch.Coalescer[*writeItem]  // nil when coalescing is off
	loads      *batch.Coalescer[*loadItem]   // nil when coalescing is off
	opts       Options                       // with every default worked out
	shed       bool                          // Options.ShedLoad
	stop       context.Context               // ends when Close gives up waiting
	stopNow    context.CancelFunc
	outboxSeq  *batch.Sequence
	spawnSeq   *batch.Sequence
	stats      *statCounters
}

// Open connects to the server at uri and returns a store. It pings the server, retrying with
// exponential backoff until ctx ends, so a worker started beside its database waits for it
// instead of failing; the error then names the address, never the credentials.
func Open(ctx context.Context, uri string, opts Options) (*Store, error) {
	opts = opts.withDefaults(opts.Profile)
	addr := redactedHosts(uri)
	stats := &statCounters{}
	copts := options.Client().ApplyURI(uri)
	var user *event.CommandMonitor
	if opts.ClientOptions != nil {
		user = opts.ClientOptions.Monitor
		copts = options.MergeClientOptions(copts, opts.ClientOptions)
	}
	copts.SetMonitor(countingMonitor(stats, user))
	if opts.WriteConcern == nil && copts.WriteConcern != nil && !copts.WriteConcern.Acknowledged() {
		return nil, errUnacknowledged("the URI's or Options.ClientOptions' write concern")
	}
	client, err := mongo.Connect(copts)
	if err != nil {
		return nil, fmt.Errorf("execstore: connecting to %s: %w", addr, redactErr(err, uri))
	}
	if err := pingUntil(ctx, client, opts.PingInterval); err != nil {
		_ = client.Disconnect(context.Background())
		return nil, fmt.Errorf("execstore: server at %s not reachable: %w", addr, redactErr(err, uri))
	}
	s, err := open(ctx, client, true, opts, stats)
	if err != nil {
		_ = client.Disconnect(context.Background())
		return nil, err
	}
	return s, nil
}

// OpenClient returns a store over an existing client, which stays the caller's: Close does not
// disconnect it. Server commands are not counted in Stats for such a client.
func OpenClient(ctx context.Context, client *mongo.Client, opts Options) (*Store, error) {
	opts = opts.withDefaults(opts.Profile)
	if err := pingUntil(ctx, client, opts.PingInterval); err != nil {
		return nil, fmt.Errorf("execstore: server not reachable: %w", err)
	}
	return open(ctx, client, false, opts, &statCounters{})
}

func open(ctx context.Context, client *mongo.Client, owns bool, opts Options, stats *statCounters) (*Store, error) {
	if opts.WriteConcern != nil && !opts.WriteConcern.Acknowledged() {
		return nil, errUnacknowledged("Options.WriteConcern")
	}
	info := ServerInfo{Profile: opts.Profile}
	if opts.Profile == Detect {
		detected, err := ops.Detect(ctx, client)
		if err != nil {
			return nil, err
		}
		info = ServerInfo{Profile: profileOf(detected.Profile), Version: detected.Version,
			FerretDBVersion: detected.FerretDBVersion}
	}
	opts = opts.withDefaults(info.Profile)
	dbOpts := options.Database()
	if opts.WriteConcern != nil {
		dbOpts.SetWriteConcern(opts.WriteConcern)
	}
	if opts.ReadConcern != nil {
		dbOpts.SetReadConcern(opts.ReadConcern)
	}
	db := client.Database(opts.Database, dbOpts)
	executions := db.Collection(ops.ExecutionsCollection)
	if !owns && opts.WriteConcern == nil {
		// The client's write concern cannot be read back from it: ask the server.
		if err := ops.CheckAcknowledged(ctx, db.Collection(ops.CountersCollection)); err != nil {
			if errors.Is(err, ops.ErrUnacknowledged) {
				return nil, errUnacknowledged("the client's write concern")
			}
			return nil, err
		}
	}
	s := &Store{
		client:     client,
		ownsClient: owns,
		info:       info,
		env: ops.Env{
			Executions:   executions,
			Primary:      ops.PrimaryReads(executions),
			Durable:      ops.DurableReads(executions),
			Counters:     db.Collection(ops.CountersCollection),
			Profile:      info.Profile.ops(),
			TraceMax:     opts.TraceMax,
			DedupeWindow: opts.DedupeWindow,
		},
		stats: stats,
	}
	s.stop, s.stopNow = context.WithCancel(context.Background())
	if err := ops.EnsureIndexes(ctx, s.env); err != nil {
		return nil, err
	}
	s.outboxSeq = batch.NewSequence(func(ctx context.Context, n int64) (int64, error) {
		return ops.Reserve(ctx, s.env, ops.OutboxCounter, n)
	}, opts.SeqBlockSize)
	s.spawnSeq = batch.NewSequence(func(ctx context.Context, n int64) (int64, error) {
		return ops.Reserve(ctx, s.env, ops.SpawnCounter, n)
	}, opts.SeqBlockSize)
	s.opts, s.shed = opts, opts.ShedLoad
	if !opts.DisableGroupCommit {
		s.group = newGroupCommit(s, opts)
	}
	if !opts.DisableCoalescing {
		newCoalescers(s, opts)
	}
	s.pool = pool.New(pool.Config{Workers: opts.Workers, QueueDepth: opts.QueueDepth})
	return s, nil
}

// Profile returns the server profile the store uses.
func (s *Store) Profile() Profile { return s.info.Profile }

// Server returns what the store learned of the server at Open.
func (s *Store) Server() ServerInfo { return s.info }

// Close stops accepting calls, drains queued and in-flight work within ctx, releases the seq
// prefetchers and, for a store made by Open, disconnects the client. No goroutine of the store
// outlives it.
func (s *Store) Close(ctx context.Context) error {
	err := s.pool.Close(ctx)
	if err != nil {
		s.stopNow() // batches still queued are refused, those in flight cancelled
	}
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		if s.group != nil {
			s.group.Close()
		}
		if s.writes != nil {
			s.writes.Close()
			s.loads.Close()
		}
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		s.stopNow()
		<-drained
		if err == nil {
			err = ctx.Err()
		}
	}
	s.stopNow()
	s.outboxSeq.Close()
	s.spawnSeq.Close()
	if s.ownsClient {
		if derr := s.client.Disconnect(ctx); derr != nil && err == nil && !errors.Is(derr, mongo.ErrClientDisconnected) {
			err = derr
		}
	}
	return err
}

// errUnacknowledged refuses a store whose writes would not be acknowledged: every commit's
// outcome would be unknown, and the version guard could not tell a conflict from a write that
// has not landed yet.
func errUnacknowledged(source string) error {
	return contract.Invalid("write concern", "%s is unacknowledged (w: 0); a store needs acknowledged writes: "+
		"set w to 1 or more, or \"majority\" (for example Options.WriteConcern = writeconcern.Majority())", source)
}

func pingUntil(ctx context.Context, client *mongo.Client, first time.Duration) error {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = first
	b.MaxInterval = 5 * time.Second
	b.MaxElapsedTime = 0
	var last error
	err := backoff.Retry(func() error {
		attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		last = client.Ping(attempt, nil)
		return last
	}, backoff.WithContext(b, ctx))
	if err != nil && last != nil && !errors.Is(err, last) {
		return fmt.Errorf("%w (last attempt: %v)", err, last)
	}
	return err
}

func countingMonitor(c *statCounters, user *event.CommandMonitor) *event.CommandMonitor {
	m := &event.CommandMonitor{
		Started: func(ctx context.Context, e *event.CommandStartedEvent) {
			c.cmds.Add(1)
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

// redactedHosts returns the hosts of uri without credentials, for error messages.
func redactedHosts(uri string) string {
	cs, err := connstring.Parse(uri)
	if err != nil || len(cs.Hosts) == 0 {
		return "(unparsable URI)"
	}
	return strings.Join(cs.Hosts, ",")
}

// redactErr removes the URI's password from an error's text, should the driver quote it.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

func redactErr(err error, uri string) error {
	cs, perr := connstring.Parse(uri)
	if perr != nil || cs.Password == "" {
		if perr != nil {
			return &redactedError{msg: strings.ReplaceAll(err.Error(), uri, "(uri)"), err: err}
		}
		return err
	}
	return &redactedError{msg: strings.ReplaceAll(err.Error(), cs.Password, "xxxxx"), err: err}
}
