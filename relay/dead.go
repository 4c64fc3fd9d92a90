package relay

import (
	"errors"
	"time"

	"github.com/execstore/execstore"
)

// DeadEvent is an item moved to dead by a relay or sweeper: its deliveries failed
// Options.MaxAttempts times, or its handler returned an error wrapping ErrPermanent.
type DeadEvent struct {
	Item     execstore.ItemRef
	Attempts execstore.Attempts // as recorded by the write that moved it, this failure included
	Err      error              // the handler's error of the last delivery
}

// failure is the record of a handler's failure for a DeadLetters store (else nil): dead when
// permanent, else the store decides from the attempts it holds. The caller holds mu.
func (s *session[T, K]) failure(err error) *execstore.Failure {
	if s.r.dead == nil {
		return nil
	}
	text := err.Error()
	if stack := panicStack(err); stack != "" {
		text += "\n" + stack
	}
	return &execstore.Failure{Error: text, At: time.Now(), MaxAttempts: s.r.opts.MaxAttempts,
		Dead: errors.Is(err, ErrPermanent)}
}

// recordFailures writes the failures of batch, up to ackFanOut at once. An item moved to
// dead is as if acked: its execution's later items go on. Any other is released.
func (s *session[T, K]) recordFailures(batch []*entry[T, K]) {
	type result struct {
		attempts execstore.Attempts
		pending  bool
		err      error
	}
	results := make([]result, len(batch))
	fanOut(len(batch), ackFanOut, func(i int) {
		ref := s.r.kind.ref(batch[i].item)
		a, ok, err := s.r.dead.Fail(s.ackCtx, ref, *batch[i].fail)
		if errors.Is(err, execstore.ErrOutcomeUnknown) { // it may have moved the item to dead
			if ra, rok, rerr := s.readBackDead(ref); rerr == nil {
				a, ok, err = ra, rok, nil
			}
		}
		results[i] = result{a, ok, err}
	})
	var dead []DeadEvent
	var reports []error
	s.mu.Lock()
	for i, st := range batch {
		res := results[i]
		if res.err == nil && res.pending && movedToDead(st.fail, res.attempts) {
			s.fl.bury(st)
			s.fl.retries.succeeded(st.lane)
			s.r.stats.dead.Add(1)
			s.r.book.movedToDead(s.partOf(st.item))
			dead = append(dead, DeadEvent{Item: s.r.kind.ref(st.item), Attempts: res.attempts, Err: st.cause})
		} else {
			if res.err != nil {
				s.r.stats.failureErrors.Add(1)
				if s.ackCtx.Err() == nil {
					reports = append(reports, &Error{Op: OpFail, Item: s.r.kind.describe(st.item), Err: res.err})
				}
			}
			s.fl.release(st)
		}
		poke(s.rescan) // its execution's later items go on, or a scan finds it after its back-off
	}
	s.mu.Unlock()
	for _, err := range reports {
		s.r.opts.OnError(err)
	}
	for _, ev := range dead {
		s.r.tel.Dead()
		attrs := []any{"item", ev.Item, "attempts", ev.Attempts.Count, "error", ev.Attempts.LastError}
		if stack := panicStack(ev.Err); stack != "" {
			attrs[len(attrs)-1] = ev.Err.Error() // the stored text goes on with the stack
			attrs = append(attrs, "stack", stack)
		}
		s.r.opts.Logger.Warn("relay: item moved to dead after its deliveries failed: it is delivered no more until revived; its execution's later items go on", attrs...)
		s.r.opts.OnDead(ev)
	}
}

// readBackDead reads the dead items of ref's execution: it returns ref's attempts and
// whether ref is among them.
func (s *session[T, K]) readBackDead(ref execstore.ItemRef) (execstore.Attempts, bool, error) {
	q := execstore.DeadQuery{Kinds: []execstore.ItemKind{ref.Kind}, ExecutionID: ref.ExecutionID, Limit: 1000}
	for {
		page, err := s.r.dead.ListDead(s.ackCtx, q)
		if err != nil {
			return execstore.Attempts{}, false, err
		}
		for _, d := range page.Items {
			if d.Kind == ref.Kind && d.Seq == ref.Seq && d.Path == ref.Path && d.FireAt.Equal(ref.FireAt) {
				return d.Attempts, true, nil
			}
		}
		if page.NextCursor == "" {
			return execstore.Attempts{}, false, nil
		}
		q.Cursor = page.NextCursor
	}
}

// movedToDead reports whether a record of f that took effect with attempts a moved its item
// to dead.
func movedToDead(f *execstore.Failure, a execstore.Attempts) bool {
	return f.Dead || f.MaxAttempts > 0 && a.Count >= f.MaxAttempts
}
