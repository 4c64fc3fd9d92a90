package relay

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"runtime/debug"
	"sync"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/telemetry"
	"github.com/execstore/execstore/internal/wake"
)

// runner is the life cycle a Relay and a Sweeper share: Run, Close, Stats. Each Run is a
// session.
type runner[T any, K comparable] struct {
	kind    kind[T, K]
	handler func(context.Context, T) error
	opts    Options
	signal  *wake.Signal // nil: the store registered none, the runner only polls
	// board is the store's board (wake.Board) when the relay holds its partitions under
	// leases and Options.WakeInterval is positive: commits of other processes wake it there.
	board     wake.Board
	boardKind wake.Kind // what the runner delivers, as the board names it
	lease     leaser
	// offer is the store when Options.Lease is nil and it offers a lease store, in which the
	// relay holds every partition under the sole lease (sole.go), or stands by; else nil.
	offer leaseOffer
	dead  execstore.DeadLetters // the store, when it keeps failures and dead items; else nil
	// retaining is the store when Options.Retention is set and the store deletes finished
	// executions; else nil.
	retaining execstore.Retaining
	// counting is the store when it counts dead items by partition and
	// Options.DeadCountInterval is not negative; else nil.
	counting execstore.DeadCounting
	// rates is the store when it records rate samples and Options.RatesInterval is
	// positive; else nil. component is what the samples name the runner: "relay",
	// "sweeper".
	rates     execstore.RateRecording
	component string
	rateRec   rateRecorder // what the rate records settled
	stats     counters
	tel       *telemetry.Telemetry // nil: no-op providers
	op        string               // the handler's operation, in spans: "deliver", "fire"
	// parts is the number of partitions: the store's when it is an execstore.Partitioned,
	// else 1.
	parts int
	// chained: the items are kept in commit order (outbox entries), so a commit is handed
	// over only when every earlier item of its execution is known.
	chained bool
	// member names the relay among the relays of its lease key: Options.Name (or the host
	// and the process) and a random part.
	member string
	// book keeps what the last scan of each partition held found waiting (Backlog).
	book backlogBook

	mu      sync.Mutex
	closed  bool
	running bool
	session *session[T, K] // the Run in progress's
	done    chan struct{}  // closed when the Run in progress returns
	gen     int64          // the latest generation the last Run drew (session.gens)
}

func newRunner[T any, K comparable](k kind[T, K], store execstore.Store, handler func(context.Context, T) error, opts Options,
	component, op string, boardKind wake.Kind) *runner[T, K] {
	r := &runner[T, K]{kind: k, handler: handler, opts: opts, signal: wake.Of(store), op: op, parts: 1, boardKind: boardKind}
	if ps, ok := store.(execstore.Partitioned); ok {
		r.parts = max(ps.Partitions(), 1)
	}
	r.dead, _ = store.(execstore.DeadLetters)
	if opts.Retention != nil {
		r.retaining, _ = store.(execstore.Retaining)
	}
	if opts.DeadCountInterval > 0 {
		r.counting, _ = store.(execstore.DeadCounting)
	}
	if opts.RatesInterval > 0 {
		r.rates, _ = store.(execstore.RateRecording)
	}
	r.component = component
	r.member = memberName(opts.Name)
	r.book.holder = r.member
	r.chained = k.chained()
	r.tel = telemetry.NewRelay(component, opts.TracerProvider, opts.MeterProvider, r.stats.inFlight.Load, r.backlogPoints)
	if o, ok := store.(leaseOffer); ok && opts.Lease == nil {
		r.offer = o
	}
	if r.leases() && opts.WakeInterval > 0 {
		r.board = wake.BoardOf(store)
	}
	r.lease = leaser{store: opts.Lease, holder: r.member, dur: opts.LeaseDuration, stats: &r.stats, report: opts.OnError, log: opts.Logger}
	return r
}

// memberName is a relay's name among its peers: name (default: host and process id), then
// 8 random bytes in hex.
func memberName(name string) string {
	if name == "" {
		host, _ := os.Hostname()
		name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	return name + "-" + hex.EncodeToString(b[:])
}

// leases reports whether the relay holds its partitions under leases: Options.Lease, or the
// sole lease of a store that offers a lease store.
func (r *runner[T, K]) leases() bool { return r.opts.Lease != nil || r.offer != nil }

// partitioned reports whether the store is divided into partitions.
func (r *runner[T, K]) partitioned() bool { return r.parts > 1 }

// partOf is execution id's partition.
func (r *runner[T, K]) partOf(id string) int {
	if r.parts <= 1 {
		return 0
	}
	return execstore.PartitionOf(id, r.parts)
}

// run is Run: one session, until ctx ends, Close is called or it ends on a fatal failure.
func (r *runner[T, K]) run(ctx context.Context) error {
	if err := checkName(r.opts.Name); err != nil {
		return &Error{Op: OpClaim, Item: r.opts.Name, Err: err} // before any call
	}
	if r.leases() {
		if err := checkLeaseKey(r.opts.LeaseKey); err != nil {
			return &Error{Op: OpClaim, Item: r.opts.LeaseKey, Err: err} // before any call reaches the lease store
		}
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return execstore.ErrClosed
	}
	if r.running {
		r.mu.Unlock()
		return ErrRunning
	}
	s := newSession(r, ctx)
	s.gens.cur = r.gen // the generations grow across the runs of the relay's holder
	done := make(chan struct{})
	r.running, r.session, r.done = true, s, done
	r.mu.Unlock()
	defer func() {
		s.abort()
		s.mu.Lock()
		gen := s.gens.cur
		s.mu.Unlock()
		r.mu.Lock()
		r.running, r.session, r.gen = false, nil, gen
		r.mu.Unlock()
		close(done)
	}()

	cause := s.run()
	r.stats.holding.Store(false)
	r.book.clear()
	return cause
}

// close is Close: stop the Run in progress, if any, and wait for it within ctx; when ctx
// ends first, cancel its handlers and acks and return ctx's error.
func (r *runner[T, K]) close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	running, s, done := r.running, r.session, r.done
	r.mu.Unlock()
	if !running {
		return nil
	}
	s.stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.abort()
		return ctx.Err()
	}
}

// handle calls the handler, and turns its panic into a *PanicError: a delivery that failed,
// as the handler's error would have, with the panic's value and stack. The relay goes on.
func (r *runner[T, K]) handle(ctx context.Context, item T) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = &PanicError{Value: p, Stack: debug.Stack()}
		}
	}()
	return r.handler(ctx, item)
}
