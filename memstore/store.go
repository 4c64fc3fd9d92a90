package memstore

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/wake"
)

// Options configures a Store. The zero value is ready to use. Every field documents its default.
type Options struct {
	// TraceMax is how many trace steps an execution keeps. The oldest are dropped by the
	// write that appends. Default (0 or less) 200, as the MongoDB store's.
	TraceMax int
	// DedupeWindow bounds each execution's dedupe set exactly as the MongoDB store's
	// aio.Options.DedupeWindow does. When positive, the set keeps the event ids of at least
	// the last DedupeWindow commits and of at most the last 2×DedupeWindow. Default (0 or
	// less): every id is kept.
	DedupeWindow int
	// Partitions is the number of partitions the executions are divided into
	// (execstore.Partitioned): an execution's partition is execstore.PartitionOf(id,
	// Partitions). Default (0 or less) execstore.DefaultPartitions. New panics when it is past
	// execstore.MaxPartitions.
	Partitions int
}

// Store is an execstore.Store in process memory (see the package doc). Create it with New.
// Every method is safe for concurrent use.
type Store struct {
	traceMax     int
	dedupeWindow int64
	partitions   int
	// signal is the store's own wake-up signal (package internal/wake), registered under the
	// store from New to Close: commits that emit, spawn or arm timers notify its relays.
	signal *wake.Signal

	// mu guards everything below. Writes hold it for the whole of their change, so a change is
	// seen whole or not at all; reads hold it for reading.
	mu     sync.RWMutex
	closed bool
	execs  map[string]*record
	ids    []string // the ids of execs, sorted: List pages through them
	outbox relayQueue[outboxItem]
	spawns relayQueue[spawnItem]
	dead   map[contract.DeadKey]execstore.DeadItem // the dead items (dead.go)
	// retained counts the executions DeleteExpired deleted, by status; retainedAt is when
	// it last did (retention.go).
	retained   map[execstore.Status]int64
	retainedAt time.Time
}

var _ execstore.Store = (*Store)(nil)

// record is everything the store keeps of one execution.
type record struct {
	// exe is the execution as Load returns it: its Data belongs to the store, and its
	// TraceNext is the index the next trace step gets.
	exe    execstore.Execution
	dedupe dedupeSet
	timers map[string]float64 // fire time by path, stored as package aio stores it (seconds)
	// timerVersions names each timer's arming, by path: the version of the commit that armed
	// it (execstore.DueTimer.Version), kept by a revive.
	timerVersions map[string]int64
	// timerFails are the failed deliveries of timers, by path, each of the fire time it
	// failed at: a timer armed or cancelled anew starts with none.
	timerFails map[string]timerFail
	trace      []traceEntry // oldest first, at most Store.traceMax
	// finishedAt is when the last commit that wrote a finished status was made; zero
	// before any.
	finishedAt time.Time
}

// New returns an empty store.
func New(opts Options) *Store {
	s := &Store{traceMax: opts.TraceMax, execs: map[string]*record{}, dead: map[contract.DeadKey]execstore.DeadItem{}}
	if s.traceMax <= 0 {
		s.traceMax = contract.DefaultTraceMax
	}
	if opts.DedupeWindow > 0 {
		s.dedupeWindow = int64(opts.DedupeWindow)
	}
	s.partitions = execstore.DefaultPartitions
	if opts.Partitions > execstore.MaxPartitions {
		panic(fmt.Sprintf("memstore: Options.Partitions is %d, past execstore.MaxPartitions (%d)", opts.Partitions, execstore.MaxPartitions))
	}
	if opts.Partitions > 0 {
		s.partitions = opts.Partitions
	}
	s.signal = wake.For(fmt.Sprintf("memstore:%p", s))
	wake.Register(s, s.signal)
	return s
}

// lock takes the write lock for a call made with ctx: ctx's error if ctx has ended (before or
// while waiting for the lock), ErrClosed once the store is closed. On nil the caller holds the
// lock and must unlock it.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.usable(ctx); err != nil {
		s.mu.Unlock()
		return err
	}
	return nil
}

// readRecord checks id, takes the read lock and returns id's record, nil when there is none;
// on a nil error the caller must RUnlock.
func (s *Store) readRecord(ctx context.Context, id string) (*record, error) {
	if err := contract.ValidateID("id", id); err != nil {
		return nil, err
	}
	if err := s.rlock(ctx); err != nil {
		return nil, err
	}
	return s.execs[id], nil
}

// rlock is lock for reading; on nil the caller must RUnlock.
func (s *Store) rlock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.RLock()
	if err := s.usable(ctx); err != nil {
		s.mu.RUnlock()
		return err
	}
	return nil
}

func (s *Store) usable(ctx context.Context) error {
	if s.closed {
		return execstore.ErrClosed
	}
	return ctx.Err()
}

// insert adds a new execution's record under id, keeping ids sorted.
func (s *Store) insert(id string, r *record) {
	s.execs[id] = r
	i := sort.SearchStrings(s.ids, id)
	s.ids = append(s.ids, "")
	copy(s.ids[i+1:], s.ids[i:])
	s.ids[i] = id
}

// Close makes every later call return execstore.ErrClosed and drops what the store holds. It
// waits for the calls in progress, which never block, so it needs nothing of ctx. It always
// returns nil, and closing again is a no-op.
func (s *Store) Close(ctx context.Context) error {
	wake.Unregister(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.execs, s.ids = nil, nil
	s.outbox, s.spawns = relayQueue[outboxItem]{}, relayQueue[spawnItem]{}
	return nil
}
