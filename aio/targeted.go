package aio

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/hedge"
	"github.com/execstore/execstore/internal/opsrun"
)

var _ execstore.Targeted = (*Store)(nil)

// PendingOutboxOf is PendingOutbox restricted to the sources ids: one find of their documents
// by _id, whatever the pending-work indexes hold; a second, the same, when the first has not
// answered in a few times the usual latency (wakeCalls). An invalid id, or more than
// execstore.MaxTargetedIDs of them, is refused with execstore.ErrInvalid before any I/O. An id
// named twice counts once. An empty list returns nothing, with no I/O.
func (s *Store) PendingOutboxOf(ctx context.Context, ids []string, limit int) ([]execstore.OutboxEntry, error) {
	targets, err := checkTargets(ids, limit)
	if err != nil || len(targets) == 0 {
		return nil, err
	}
	return submit(ctx, s, opPendingOutbox, "", func(ctx context.Context) ([]execstore.OutboxEntry, error) {
		return hedge.Call(ctx, &s.wakeCalls.outbox, func(ctx context.Context) ([]execstore.OutboxEntry, error) {
			return opsrun.PendingOutboxOf(ctx, s.env, targets, limit)
		})
	}).Wait(ctx)
}

// DueTimersOf is DueTimers restricted to the executions ids, with the checks of
// PendingOutboxOf: one find of their documents by _id (two when the first is late).
func (s *Store) DueTimersOf(ctx context.Context, ids []string, now time.Time, limit int) ([]execstore.DueTimer, error) {
	if err := contract.ValidateFireTime("now", now); err != nil {
		return nil, err
	}
	targets, err := checkTargets(ids, limit)
	if err != nil || len(targets) == 0 {
		return nil, err
	}
	return submit(ctx, s, opDueTimers, "", func(ctx context.Context) ([]execstore.DueTimer, error) {
		return hedge.Call(ctx, &s.wakeCalls.timers, func(ctx context.Context) ([]execstore.DueTimer, error) {
			return opsrun.DueTimersOf(ctx, s.env, targets, now, limit)
		})
	}).Wait(ctx)
}

// checkTargets checks a targeted read's arguments and returns its ids sorted, each once.
func checkTargets(ids []string, limit int) ([]string, error) {
	if err := contract.ValidateLimit("limit", limit); err != nil {
		return nil, err
	}
	return contract.ValidateTargets("ids", ids)
}

// wakeCalls are the commands of a wake-up, each kind with its latencies: the board's writes
// of marks, a relay's reads of its marks and its targeted reads. Each is hedged (package
// hedge): a server's one slow command would otherwise make a delivery as late.
type wakeCalls struct {
	outbox, timers, marks, marksWrite hedge.Calls
}

// wait waits until the sends the store owns have ended: the targeted reads' (their worker's
// context ends with their task) and the writes of marks' (theirs with the store). A read of
// marks ends with its caller's context, a relay's session.
func (w *wakeCalls) wait() {
	w.outbox.Wait()
	w.timers.Wait()
	w.marksWrite.Wait()
}

// hedged returns how many second sends they made.
func (w *wakeCalls) hedged() int64 {
	return w.outbox.Hedged() + w.timers.Hedged() + w.marks.Hedged() + w.marksWrite.Hedged()
}
