package relay

import (
	"context"
	"fmt"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/wake"
)

// Sweeper fires a store's due timers. Every timer whose fire time has come is handed to the
// handler, and deleted once the handler returned nil. The delete is guarded by the fire
// time, so a re-schedule survives. It is a Relay for timers, with the same lanes (by
// execution), lease, retries and guarantees (see the package doc). Create it with
// NewSweeper. Its methods are safe for concurrent use.
type Sweeper struct {
	r *runner[execstore.DueTimer, timerKey]
}

// NewSweeper returns a sweeper of store's timers that hands due timers to handler. It starts
// nothing: call Run. Each scan also looks Options.PollInterval ahead. The sweeper then sleeps
// until the earliest fire time it saw, the poll interval, or a wake-up. A wake-up is by a
// commit of this process that armed a timer firing before its next look. handler's context
// and results are as New's. NewSweeper panics when store or handler is nil.
func NewSweeper(store execstore.Store, handler func(ctx context.Context, t execstore.DueTimer) error, opts Options) *Sweeper {
	if store == nil || handler == nil {
		panic("relay: NewSweeper needs a store and a handler")
	}
	opts = opts.withDefaults(sweeperLeaseKey)
	return &Sweeper{r: newRunner[execstore.DueTimer, timerKey](timerKind{store: store}, handler, opts, wake.Of(store), "sweeper", "fire")}
}

// Run fires due timers until ctx ends or Close is called. See Relay.Run.
func (s *Sweeper) Run(ctx context.Context) error { return s.r.run(ctx) }

// Close stops the sweeper. See Relay.Close.
func (s *Sweeper) Close(ctx context.Context) error { return s.r.close(ctx) }

// Stats returns the sweeper's counters. Acked counts deleted timers.
func (s *Sweeper) Stats() Stats { return s.r.stats.snapshot() }

// timerKey is a due timer's identity: a timer re-scheduled to another time is another item.
type timerKey struct {
	execution, path string
	sec             int64 // FireAt's instant, whatever its location
	nsec            int
}

// timerKind is the kind of a Sweeper: DueTimers, DeleteTimers.
type timerKind struct {
	store execstore.Store
}

func (timerKind) key(t execstore.DueTimer) timerKey {
	return timerKey{execution: t.ExecutionID, path: t.Path, sec: t.FireAt.Unix(), nsec: t.FireAt.Nanosecond()}
}

func (timerKind) lane(t execstore.DueTimer) string { return t.ExecutionID }

func (timerKind) describe(t execstore.DueTimer) string {
	return fmt.Sprintf("%s/%s@%s", t.ExecutionID, t.Path, t.FireAt.UTC().Format(time.RFC3339Nano))
}

// arm wakes the sweeper for a timer armed to fire before its next look, at now+ahead.
func (timerKind) arm(sig *wake.Signal, now time.Time, ahead time.Duration) <-chan struct{} {
	if sig == nil {
		return nil
	}
	return sig.ScheduledBeforeC(contract.StoredTime(now.Add(ahead)))
}

// scan reads the timers due by now+ahead, earliest first: the due ones are the result, the
// first one not yet due is the next fire time.
func (k timerKind) scan(ctx context.Context, now time.Time, ahead time.Duration, limit int) (scanned[execstore.DueTimer], error) {
	timers, err := k.store.DueTimers(ctx, now.Add(ahead), limit)
	if err != nil {
		return scanned[execstore.DueTimer]{}, err
	}
	due := len(timers)
	for i, t := range timers {
		if t.FireAt.After(now) {
			due = i
			break
		}
	}
	res := scanned[execstore.DueTimer]{items: timers[:due], full: len(timers) >= limit && due == len(timers)}
	if due < len(timers) {
		res.next = timers[due].FireAt
	}
	return res, nil
}

// settle deletes the fired timers in one guarded bulk delete: its error is every timer's.
func (k timerKind) settle(ctx context.Context, timers []execstore.DueTimer) []error {
	err := k.store.DeleteTimers(ctx, timers)
	if err == nil {
		return nil
	}
	errs := make([]error, len(timers))
	for i := range errs {
		errs[i] = err
	}
	return errs
}
