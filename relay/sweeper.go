package relay

import (
	"context"
	"slices"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/wake"
)

// Sweeper fires a store's due timers. Every timer whose fire time has come is handed to the
// handler, and deleted once the handler returned nil. The delete is guarded by the fire
// time and the timer's arming (execstore.DueTimer.Version), so a re-schedule survives, even
// one to the same fire time by the timer's own handler, and fires again. It is a Relay for
// timers, with the same lanes (by execution), lease, retries and guarantees (see the package
// doc). Create it with NewSweeper. Its methods are safe for concurrent use.
type Sweeper struct {
	r *runner[execstore.DueTimer, timerKey]
}

// NewSweeper returns a sweeper of store's timers that hands due timers to handler. It starts
// nothing: call Run. A commit through a store of this process (aio and memstore) gives it
// the timers it armed, with no scan. handler's context and results are as New's.
// NewSweeper panics when store or handler is nil.
func NewSweeper(store execstore.Store, handler func(ctx context.Context, t execstore.DueTimer) error, opts Options) *Sweeper {
	if store == nil || handler == nil {
		panic("relay: NewSweeper needs a store and a handler")
	}
	opts = opts.withDefaults(sweeperLeaseKey)
	return &Sweeper{r: newRunner[execstore.DueTimer, timerKey](timerKind{store: store, commitRemoves: opts.CommitRemovesTimer, signal: wake.Of(store)}, store, handler, opts, "sweeper", "fire", wake.Timers)}
}

// Run fires due timers until ctx ends or Close is called. See Relay.Run.
func (s *Sweeper) Run(ctx context.Context) error { return s.r.run(ctx) }

// Close stops the sweeper. See Relay.Close.
func (s *Sweeper) Close(ctx context.Context) error { return s.r.close(ctx) }

// Stats returns the sweeper's counters. Acked counts deleted timers.
func (s *Sweeper) Stats() Stats { return s.r.stats.snapshot() }

// Backlog returns, for each partition the sweeper holds, what its last scan of it found due,
// in partition order. It sends nothing.
func (s *Sweeper) Backlog() []Backlog { return s.r.book.all() }

// Member is the name the sweeper holds its leases under (Relay.Member).
func (s *Sweeper) Member() string { return s.r.member }

// timerKey is a due timer's identity: a timer re-scheduled, or re-armed to the same time by
// a later commit (another Version), is another item.
type timerKey struct {
	execution, path string
	sec             int64 // FireAt's instant, whatever its location
	nsec            int
	version         int64 // DueTimer.Version (0 when the store keeps none)
}

// timerKind is the kind of a Sweeper: DueTimers, DeleteTimers.
type timerKind struct {
	store         execstore.Store
	commitRemoves bool         // Options.CommitRemovesTimer
	signal        *wake.Signal // the store's, through which a commit removes a timer
}

func (timerKind) key(t execstore.DueTimer) timerKey {
	return timerKey{execution: t.ExecutionID, path: t.Path, sec: t.FireAt.Unix(), nsec: t.FireAt.Nanosecond(), version: t.Version}
}

func (timerKind) lane(t execstore.DueTimer) string     { return t.ExecutionID }
func (timerKind) source(t execstore.DueTimer) string   { return t.ExecutionID }
func (timerKind) chained() bool                        { return false }
func (timerKind) version(execstore.DueTimer) int64     { return 0 }
func (timerKind) dueAt(t execstore.DueTimer) time.Time { return t.FireAt }

func (k timerKind) describe(t execstore.DueTimer) string { return k.ref(t).String() }

func (timerKind) ref(t execstore.DueTimer) execstore.ItemRef {
	return execstore.ItemRef{Kind: execstore.TimerItem, ExecutionID: t.ExecutionID, Path: t.Path, FireAt: t.FireAt}
}

func (timerKind) waiting(t execstore.DueTimer, now time.Time) (time.Time, bool) {
	return t.FireAt, !t.FireAt.After(now)
}

func (k timerKind) scan(ctx context.Context, parts []int, _ []string, now time.Time, ahead time.Duration, limit int) (scanned[execstore.DueTimer], error) {
	var timers []execstore.DueTimer
	var err error
	if ps, ok := k.store.(execstore.Partitioned); ok {
		timers, err = ps.DueTimersIn(ctx, parts, now.Add(ahead), limit)
	} else {
		timers, err = k.store.DueTimers(ctx, now.Add(ahead), limit)
	}
	return scanned[execstore.DueTimer]{items: timers, full: len(timers) >= limit}, err
}

// excludes is false: a sweeper's scans read ahead, and a timer of an execution left out
// would be read no sooner than it is due.
func (timerKind) excludes() bool { return false }

func (k timerKind) targeted() bool {
	_, ok := k.store.(execstore.Targeted)
	return ok
}

func (k timerKind) read(ctx context.Context, ids []string, now time.Time, ahead time.Duration, limit int) (scanned[execstore.DueTimer], error) {
	timers, err := k.store.(execstore.Targeted).DueTimersOf(ctx, ids, now.Add(ahead), limit)
	return scanned[execstore.DueTimer]{items: timers, full: len(timers) >= limit}, err
}

// carried is none: a mark carries no timers.
func (timerKind) carried(wake.Mark) []execstore.DueTimer { return nil }

// handed returns the timers c armed that fire by horizon, as the scans return them, but
// those a later operation of c replaced. Later ones are left to the scans.
func (timerKind) handed(c *wake.Committed, horizon time.Time) []execstore.DueTimer {
	var out []execstore.DueTimer
	for i, t := range c.Timers {
		rearmed := slices.ContainsFunc(c.Timers[i+1:], func(later execstore.TimerOp) bool { return later.Path == t.Path })
		if t.Cancel || t.FireAt.After(horizon) || rearmed {
			continue
		}
		out = append(out, execstore.DueTimer{ExecutionID: c.ExecutionID, Path: t.Path, FireAt: t.FireAt, Version: c.Version})
	}
	contract.SortDueTimers(out)
	return out
}

// gone reports whether c cancelled or re-armed timer t: a re-arm to the same fire time is
// another arming (c's Version), unless t is of c already.
func (timerKind) gone(c *wake.Committed, t execstore.DueTimer) bool {
	return c.ExecutionID == t.ExecutionID && slices.ContainsFunc(c.Timers, func(op execstore.TimerOp) bool {
		return op.Path == t.Path && (op.Cancel || !op.FireAt.Equal(t.FireAt) || t.Version != c.Version)
	})
}

// fired gives t's handler, with Options.CommitRemovesTimer, a context with which a commit
// of t's execution through a store of this process removes t in its own write (aio).
func (k timerKind) fired(ctx context.Context, t execstore.DueTimer) (context.Context, *wake.FiredTimer) {
	if !k.commitRemoves || k.signal == nil {
		return ctx, nil
	}
	f := wake.NewFiredTimer(t, k.signal)
	return wake.WithFiredTimer(ctx, f), f
}

// settle deletes the fired timers in one guarded bulk delete: its error is every timer's.
func (k timerKind) settle(ctx context.Context, timers []execstore.DueTimer) []error {
	if err := k.store.DeleteTimers(ctx, timers); err != nil {
		return slices.Repeat([]error{err}, len(timers))
	}
	return nil
}
