package wake

import (
	"context"
	"sync"

	"github.com/execstore/execstore"
)

// FiredTimer is a due timer a sweeper of this process handed to its handler. A commit of the
// timer's execution through a store of this process, made with the handler's context
// (WithFiredTimer), may remove the timer in its own write, guarded by the timer still firing
// at its fire time: the sweeper then sends no delete. If the handler fails after such a
// commit, the sweeper restores the timer before it records the failure, so the timer is
// handed out again: it is acknowledged only by a handler that returned nil.
type FiredTimer struct {
	Timer  execstore.DueTimer
	signal *Signal // the sweeper's store's: only a commit through a store registered on it takes the timer

	mu       sync.Mutex
	takes    uint64        // the Takes that returned true: the last names the commit in flight
	inFlight Restore       // the restore of the commit carrying the removal in flight; nil for none
	idle     chan struct{} // closed when that commit's outcome is known
	maybe    []Restore     // the restores of the commits that carried it and may have been applied
	removed  bool          // a commit that carried it won (its restore is the last of maybe)
	finished bool          // Finish was called: no commit takes it any more
}

// Restore puts back a timer a commit removed, only if that commit was applied and nothing
// changed the execution since. It reports whether it did.
type Restore func(ctx context.Context) (bool, error)

// NewFiredTimer returns t, a timer of the store registered on sig, not yet taken by any
// commit.
func NewFiredTimer(t execstore.DueTimer, sig *Signal) *FiredTimer {
	return &FiredTimer{Timer: t, signal: sig}
}

type firedKey struct{}

// WithFiredTimer returns ctx carrying f, for the handler of f's timer.
func WithFiredTimer(ctx context.Context, f *FiredTimer) context.Context {
	return context.WithValue(ctx, firedKey{}, f)
}

// FiredTimerOf returns the fired timer ctx carries when it is one of execution id of the
// store registered on sig, else nil.
func FiredTimerOf(ctx context.Context, id string, sig *Signal) *FiredTimer {
	f, _ := ctx.Value(firedKey{}).(*FiredTimer)
	if f == nil || f.Timer.ExecutionID != id || sig == nil || f.signal != sig {
		return nil
	}
	return f
}

// Superseded records that a commit re-armed or cancelled the timer's path: no commit takes
// the timer afterwards (a later one would find a timer re-armed to the same fire time, and
// remove it).
func (f *FiredTimer) Superseded() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.finished = true
}

// Take reports whether a commit may carry the timer's removal: none that carried it won, none
// carrying it is in flight, and the handler has not returned. restore puts the timer back if
// that commit is applied. Each Take that returned true is followed by Released, Removed or
// MaybeRemoved with the take it returned; the first of them for a take counts, the others
// do nothing.
func (f *FiredTimer) Take(restore Restore) (take uint64, ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.finished || f.inFlight != nil || f.removed {
		return 0, false
	}
	f.takes++
	f.inFlight, f.idle = restore, make(chan struct{})
	return f.takes, true
}

// Released records that the commit of take was not applied: it lost, was refused, or was
// sent again without the removal.
func (f *FiredTimer) Released(take uint64) { f.settle(take, false, false) }

// Removed records that the commit of take won: the timer is gone with its write.
func (f *FiredTimer) Removed(take uint64) { f.settle(take, true, true) }

// MaybeRemoved records that the outcome of the commit of take is unknown.
func (f *FiredTimer) MaybeRemoved(take uint64) { f.settle(take, true, false) }

func (f *FiredTimer) settle(take uint64, maybe, won bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.inFlight == nil || take != f.takes {
		return
	}
	if maybe {
		f.maybe = append(f.maybe, f.inFlight)
	}
	f.removed = won
	f.inFlight = nil
	close(f.idle)
}

// Finish is called once the handler returned: no commit takes the timer afterwards. It waits,
// within ctx, for a commit that took it and is still in flight, then reports whether a commit
// removed the timer (removed), and how to put it back if one may have (restore, nil when
// none did). When ctx ends first, the commit in flight counts as one that may have been
// applied; its restore may then run before it is, and find nothing to restore.
func (f *FiredTimer) Finish(ctx context.Context) (removed bool, restore Restore) {
	f.mu.Lock()
	f.finished = true
	idle := f.idle
	f.mu.Unlock()
	if idle != nil {
		select {
		case <-idle:
		case <-ctx.Done():
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	restores := append([]Restore(nil), f.maybe...)
	if f.inFlight != nil {
		restores = append(restores, f.inFlight)
	}
	if len(restores) == 0 {
		return f.removed, nil
	}
	// At most one of them was applied: each later commit was guarded by the timer being
	// there, which an applied one had removed.
	return f.removed, func(ctx context.Context) (bool, error) {
		for _, r := range restores {
			if ok, err := r(ctx); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	}
}
