package relay_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/internal/aiotest"
	"github.com/execstore/execstore/internal/testserver"
	"github.com/execstore/execstore/internal/wake"
	"github.com/execstore/execstore/memstore"
)

// srv is the embedded FerretDB behind its front, or MONGODB_URI when set: the aio backend,
// the leases and the examples run on it.
var srv *testserver.Server

// TestMain starts the server, runs the tests and checks that no goroutine was left behind
// (goleak, in testserver.Main).
func TestMain(m *testing.M) { os.Exit(testserver.Main(m, &srv)) }

var bg = context.Background()

// waitLong bounds every wait for something that must happen; no test asserts a duration.
const waitLong = 30 * time.Second

// backend opens the stores a test runs on.
type backend struct {
	name string
	// open returns a store of t's own and a function that opens another process's store
	// over the same data (memstore: the same store, as one process's memory is).
	open func(t *testing.T) (execstore.Store, func() execstore.Store)
}

var backends = []backend{
	{"memstore", func(t *testing.T) (execstore.Store, func() execstore.Store) {
		s := memstore.New(memstore.Options{})
		t.Cleanup(func() { _ = s.Close(bg) })
		return s, func() execstore.Store { return s }
	}},
	{"aio", func(t *testing.T) (execstore.Store, func() execstore.Store) {
		var opts aio.Options // set field by field: the options' shape is still moving
		opts.Database = testserver.Database(t, "relay")
		s, _ := aiotest.Open(t, srv.URI, opts)
		return s, func() execstore.Store { return aiotest.Reopen(t, srv.URI, opts) }
	}},
}

// eachBackendSettled runs f as a subtest on every backend, the memstore one in a
// testing/synctest bubble (virtual time). f waits with settleUntil.
func eachBackendSettled(t *testing.T, f func(t *testing.T, store execstore.Store, another func() execstore.Store)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			if b.name != "memstore" {
				store, another := b.open(t)
				f(t, store, another)
				return
			}
			synctest.Test(t, func(t *testing.T) {
				store, another := b.open(t)
				f(t, store, another)
			})
		})
	}
}

// newMemstore returns a memstore closed when t ends.
func newMemstore(t *testing.T) *memstore.Store {
	s := memstore.New(memstore.Options{})
	t.Cleanup(func() { _ = s.Close(bg) })
	return s
}

// openLeases opens an idem store on a database of t's own, closed when t ends (or before, by
// the returned function, as a process that dies loses it).
func openLeases(t *testing.T, database string) (*idem.Store, func()) {
	t.Helper()
	var opts idem.Options
	opts.Database = database
	s, err := idem.Open(bg, srv.URI, opts)
	require.NoError(t, err)
	var once sync.Once
	closeIt := func() { once.Do(func() { _ = s.Close(bg) }) }
	t.Cleanup(closeIt)
	return s, closeIt
}

// emitter commits outbox entries, each from its own commit, as an engine's handlers do.
type emitter struct {
	t     *testing.T
	store execstore.Store
	mu    sync.Mutex
	exes  map[string]*execstore.Execution
}

func newEmitter(t *testing.T, store execstore.Store) *emitter {
	return &emitter{t: t, store: store, exes: map[string]*execstore.Execution{}}
}

// emit commits one entry from source to target and returns its seq.
func (e *emitter) emit(source, target, event string) int64 {
	return e.commit(source, execstore.Commit{Emits: []execstore.Emit{{TargetID: target, Event: []byte(event)}}})[0]
}

// schedule arms source's timer at path.
func (e *emitter) schedule(source, path string, fireAt time.Time) {
	e.commit(source, execstore.Commit{Timers: []execstore.TimerOp{execstore.ScheduleTimer(path, fireAt)}})
}

func (e *emitter) commit(source string, c execstore.Commit) []int64 {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	exe := e.exes[source]
	if exe == nil {
		exe = &execstore.Execution{ID: source, DefinitionID: "relay-test", Status: execstore.Running}
		e.exes[source] = exe
	}
	seqs, err := e.store.Commit(bg, exe, c)
	require.NoError(e.t, err)
	return seqs
}

// run starts r's Run in a goroutine; the returned function cancels it and returns Run's
// result. t's cleanup does so if the test did not.
func run(t *testing.T, r interface{ Run(context.Context) error }) (stop func() error) {
	ctx, cancel := context.WithCancel(bg)
	res := make(chan error, 1)
	go func() { res <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-res:
			case <-time.After(waitLong):
				err = fmt.Errorf("Run did not return within %v of its context's end", waitLong)
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// pending returns the number of pending outbox entries.
func pending(t *testing.T, store execstore.Store) int {
	t.Helper()
	p, err := store.PendingOutbox(bg, 0)
	require.NoError(t, err)
	return len(p)
}

// eventually waits until cond holds, failing t after waitLong.
func eventually(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, waitLong, 5*time.Millisecond, append([]any{msg}, args...)...)
}

// settleUntil waits until cond holds, asking every 2ms, and fails t once waitLong passed
// by time.Now. Inside a testing/synctest bubble its sleeps and its deadline
// are the bubble's virtual time: each sleep lets every goroutine of the bubble run until it
// blocks, and the time it waits costs no wall-clock time. cond runs on t's goroutine.
func settleUntil(t *testing.T, cond func() bool, msg string, args ...any) {
	t.Helper()
	settleWithin(t, waitLong, cond, msg, args...)
}

// settleWithin is settleUntil failing t once d passed.
func settleWithin(t *testing.T, d time.Duration, cond func() bool, msg string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if !time.Now().Before(deadline) {
			require.FailNow(t, fmt.Sprintf("not within %v: %s", d, fmt.Sprintf(msg, args...)))
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// probe is a store as a relay sees it: it records every ack's completion, can hold scans
// back, and can be killed (every call then fails with execstore.ErrClosed, as a dead
// process's would never arrive). It carries the wrapped store's wake-up signal.
type probe struct {
	execstore.Store

	mu     sync.RWMutex // calls hold it for reading; kill takes it
	killed bool
	acks   *ackLog
	// afterScan, when set, runs after a PendingOutbox read the store and before it returns:
	// a scan whose answer is late.
	afterScan func()
}

// ackLog records the entries whose ack completed, through any probe it is given to.
type ackLog struct {
	mu    sync.Mutex
	acked map[string]bool // source/seq
}

func newAckLog() *ackLog { return &ackLog{acked: map[string]bool{}} }

// has reports whether the ack of source/seq completed.
func (l *ackLog) has(source string, seq int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.acked[entryID(source, seq)]
}

// newProbe wraps inner; acks (nil for a log of its own) records its acks' completions.
func newProbe(t *testing.T, inner execstore.Store, acks *ackLog) *probe {
	if acks == nil {
		acks = newAckLog()
	}
	p := &probe{Store: inner, acks: acks}
	if sig := wake.Of(inner); sig != nil {
		wake.Register(p, sig)
		t.Cleanup(func() { wake.Unregister(p) })
	}
	return p
}

func entryID(source string, seq int64) string { return fmt.Sprintf("%s/%d", source, seq) }

// kill makes every later call fail; it returns once no call is in progress.
func (p *probe) kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.killed = true
}

func (p *probe) PendingOutbox(ctx context.Context, limit int) ([]execstore.OutboxEntry, error) {
	p.mu.RLock()
	if p.killed {
		p.mu.RUnlock()
		return nil, execstore.ErrClosed
	}
	entries, err := p.Store.PendingOutbox(ctx, limit)
	after := p.afterScan
	p.mu.RUnlock()
	if after != nil {
		after()
	}
	return entries, err
}

func (p *probe) AckOutbox(ctx context.Context, sourceID string, seq int64) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.killed {
		return execstore.ErrClosed
	}
	err := p.Store.AckOutbox(ctx, sourceID, seq)
	if err == nil {
		p.acks.mu.Lock()
		p.acks.acked[entryID(sourceID, seq)] = true
		p.acks.mu.Unlock()
	}
	return err
}

func (p *probe) DueTimers(ctx context.Context, now time.Time, limit int) ([]execstore.DueTimer, error) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.killed {
		return nil, execstore.ErrClosed
	}
	return p.Store.DueTimers(ctx, now, limit)
}

func (p *probe) DeleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.killed {
		return execstore.ErrClosed
	}
	return p.Store.DeleteTimers(ctx, timers)
}

// Partitions is the wrapped store's, 1 when it is not partitioned: a probe is as
// partitioned as the store it wraps.
func (p *probe) Partitions() int {
	if ps, ok := p.Store.(execstore.Partitioned); ok {
		return ps.Partitions()
	}
	return 1
}

func (p *probe) PendingOutboxIn(ctx context.Context, parts []int, limit int) ([]execstore.OutboxEntry, error) {
	ps, ok := p.Store.(execstore.Partitioned)
	if !ok {
		return p.PendingOutbox(ctx, limit)
	}
	p.mu.RLock()
	if p.killed {
		p.mu.RUnlock()
		return nil, execstore.ErrClosed
	}
	entries, err := ps.PendingOutboxIn(ctx, parts, limit)
	after := p.afterScan
	p.mu.RUnlock()
	if after != nil {
		after()
	}
	return entries, err
}

func (p *probe) PendingSpawnsIn(ctx context.Context, parts []int, limit int) ([]execstore.SpawnEntry, error) {
	if ps, ok := p.Store.(execstore.Partitioned); ok {
		return ps.PendingSpawnsIn(ctx, parts, limit)
	}
	return p.Store.PendingSpawns(ctx, limit)
}

func (p *probe) DueTimersIn(ctx context.Context, parts []int, now time.Time, limit int) ([]execstore.DueTimer, error) {
	ps, ok := p.Store.(execstore.Partitioned)
	if !ok {
		return p.DueTimers(ctx, now, limit)
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.killed {
		return nil, execstore.ErrClosed
	}
	return ps.DueTimersIn(ctx, parts, now, limit)
}

// unpartitioned is store as a store that is not partitioned: its relays share one lease.
// It carries the store's wake-up signal, so its commits are still handed over.
func unpartitioned(t *testing.T, store execstore.Store) execstore.Store {
	s := &struct{ execstore.Store }{store}
	if sig := wake.Of(store); sig != nil {
		wake.Register(s, sig)
		t.Cleanup(func() { wake.Unregister(s) })
	}
	return s
}
