package relay

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/wake"
)

// Relay delivers a store's outbox. Every pending entry is handed to the handler, and acked
// once the handler returned nil. See the package doc for what always holds. Create it with
// New. Its methods are safe for concurrent use.
type Relay struct {
	r *runner[execstore.OutboxEntry, entryKey]
}

// New returns a relay of store's outbox that hands entries to handler. It starts nothing:
// call Run. A commit through a store of this process (aio and memstore) gives the relay its
// entries at once, with no scan. Other commits are found by polling.
//
// handler is called with a context that is cancelled when the relay stops delivering: its
// lease is lost, Run's context ends, or Close's context ends. The handler's nil acks the
// entry. An error leaves the entry pending, and it is retried after a back-off. The later
// entries of the same execution are held back until it succeeds. ErrLeavePending does so
// without counting an error. New panics when store or handler is nil.
func New(store execstore.Store, handler func(ctx context.Context, e execstore.OutboxEntry) error, opts Options) *Relay {
	if store == nil || handler == nil {
		panic("relay: New needs a store and a handler")
	}
	opts = opts.withDefaults(relayLeaseKey)
	return &Relay{r: newRunner[execstore.OutboxEntry, entryKey](outboxKind{store: store}, store, handler, opts, "relay", "deliver", wake.Outbox)}
}

// Run delivers until ctx ends or Close is called. It then returns nil once the handlers in
// flight have returned and what they finished is acked. With Options.Lease it delivers the
// partitions it holds (see the package doc); without, every partition. It returns an error
// only when it cannot go on:
//   - the store or the lease store is closed (an *Error matching execstore.ErrClosed);
//   - the lease store refuses the key or the duration (execstore.ErrInvalid);
//   - the lease key is not a relay's (ErrLeaseKeyInUse), or is in idem's client namespace
//     (execstore.ErrInvalid);
//   - the relays of the lease key share another number of partitions
//     (ErrPartitionsDisagree);
//   - Close was called before (execstore.ErrClosed);
//   - another Run of the relay is running (ErrRunning).
func (r *Relay) Run(ctx context.Context) error { return r.r.run(ctx) }

// Close stops the relay. Run hands out no more entries and waits for the handlers in flight
// (their context is not cancelled). It acks what they finished, releases the leases and
// returns. Close waits for that within ctx. When ctx ends first, it cancels the handlers'
// context and the acks, and returns ctx's error. Run returns once the handlers have. Run
// called after Close returns execstore.ErrClosed. Closing again is a no-op.
func (r *Relay) Close(ctx context.Context) error { return r.r.close(ctx) }

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats { return r.r.stats.snapshot() }

// Backlog returns, for each partition the relay holds, what its last scan of it found
// pending, in partition order. It sends nothing.
func (r *Relay) Backlog() []Backlog { return r.r.book.all() }

// Member is the name the relay holds its leases under, among the relays of its LeaseKey:
// Options.Name (default: its host and process id), a dash and a random part.
func (r *Relay) Member() string { return r.r.member }

// entryKey is an outbox entry's identity.
type entryKey struct {
	source string
	seq    int64
}

// outboxKind is the kind of a Relay: PendingOutbox, AckOutbox.
type outboxKind struct {
	store execstore.Store
}

// ackFanOut bounds the failure records of one batch in flight at once (dead.go).
const ackFanOut = 64

func (outboxKind) key(e execstore.OutboxEntry) entryKey {
	return entryKey{source: e.SourceID, seq: e.Seq}
}

// lane is the target execution, or the source for an entry without a target.
func (outboxKind) lane(e execstore.OutboxEntry) string {
	if e.TargetID != "" {
		return e.TargetID
	}
	return e.SourceID
}

func (k outboxKind) describe(e execstore.OutboxEntry) string { return k.ref(e).String() }

func (outboxKind) source(e execstore.OutboxEntry) string { return e.SourceID }
func (outboxKind) chained() bool                         { return true }
func (outboxKind) version(e execstore.OutboxEntry) int64 { return e.Version }
func (outboxKind) dueAt(execstore.OutboxEntry) time.Time { return time.Time{} }

func (outboxKind) ref(e execstore.OutboxEntry) execstore.ItemRef {
	return execstore.ItemRef{Kind: execstore.OutboxItem, ExecutionID: e.SourceID, Seq: e.Seq}
}

func (outboxKind) waiting(e execstore.OutboxEntry, _ time.Time) (time.Time, bool) {
	return e.CommittedAt, true
}

func (k outboxKind) scan(ctx context.Context, parts []int, except []string, _ time.Time, _ time.Duration, limit int) (scanned[execstore.OutboxEntry], error) {
	var entries []execstore.OutboxEntry
	var err error
	if es, ok := k.store.(execstore.Excluding); ok && len(except) > 0 {
		entries, err = es.PendingOutboxExcept(ctx, parts, except, limit)
	} else if ps, ok := k.store.(execstore.Partitioned); ok {
		entries, err = ps.PendingOutboxIn(ctx, parts, limit)
	} else {
		entries, err = k.store.PendingOutbox(ctx, limit)
	}
	return scanned[execstore.OutboxEntry]{items: entries, full: len(entries) >= limit}, err
}

func (k outboxKind) excludes() bool {
	_, ok := k.store.(execstore.Excluding)
	return ok
}

func (k outboxKind) targeted() bool {
	_, ok := k.store.(execstore.Targeted)
	return ok
}

func (k outboxKind) read(ctx context.Context, ids []string, _ time.Time, _ time.Duration, limit int) (scanned[execstore.OutboxEntry], error) {
	entries, err := k.store.(execstore.Targeted).PendingOutboxOf(ctx, ids, limit)
	return scanned[execstore.OutboxEntry]{items: entries, full: len(entries) >= limit}, err
}

func (outboxKind) handed(c *wake.Committed, _ time.Time) []execstore.OutboxEntry { return c.Outbox }
func (outboxKind) carried(m wake.Mark) []execstore.OutboxEntry                   { return m.Outbox }
func (outboxKind) gone(*wake.Committed, execstore.OutboxEntry) bool              { return false }

// fired is nil: an entry's ack rides in a commit through the store's own AckOutbox.
func (outboxKind) fired(ctx context.Context, _ execstore.OutboxEntry) (context.Context, *wake.FiredTimer) {
	return ctx, nil
}

// settle acks the entries all at once (a batch holds at most 2×Options.Batch): a store that
// coalesces concurrent acks (aio) makes few bulk writes of them, and one that holds an ack
// for its source's next commit (aio's AckWait) would hold each group sent in turn that long.
func (k outboxKind) settle(ctx context.Context, entries []execstore.OutboxEntry) []error {
	errs := make([]error, len(entries))
	fanOut(len(entries), len(entries), func(i int) { errs[i] = k.store.AckOutbox(ctx, entries[i].SourceID, entries[i].Seq) })
	return errs
}
