package aio

import (
	"bytes"
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/batch"
	"github.com/execstore/execstore/internal/async"
	"github.com/execstore/execstore/internal/opsrun"
)

// Coalesced operations other than commits: acks (idempotent writes) go out as one bulk write,
// plain loads as one find by _id $in, and on MongoDB LoadForEvent calls as one aggregation.
// Each follows the batch.Coalescer policy: no linger when idle, accumulation while earlier
// batches are in flight.

// writeItem is one idempotent write waiting for its batch.
type writeItem struct {
	ctx  context.Context
	kind opKind
	w    opsrun.IdempotentWrite
	fut  *async.Future[struct{}]
	hand *async.Handoff
}

// loadItem is one Load or LoadForEvent waiting for its batch.
type loadItem struct {
	ctx      context.Context
	id       string
	event    string // LoadForEvent only
	epoch    uint64 // the snapshot cache's epoch when the load was submitted
	load     *async.Future[*execstore.Execution]
	forEvent *async.Future[Loaded]
	hand     *async.Handoff
}

func newCoalescers(s *Store) {
	writes := s.opts.batches(s.opts.writesInFlight(s.info.Profile))
	loads := s.opts.batches(s.opts.MaxBatchesInFlight)
	s.writes = batch.NewCoalescer(writes, func(*writeItem) int { return 128 }, s.flushWrites)
	s.loads = batch.NewCoalescer(loads, func(*loadItem) int { return 64 }, s.flushLoads)
}

// idempotentWrite runs w through the write coalescer, or alone when coalescing is off.
func (s *Store) idempotentWrite(ctx context.Context, kind opKind, w opsrun.IdempotentWrite) error {
	_, err := s.idempotentWriteAsync(ctx, kind, w).Wait(ctx)
	return err
}

// idempotentWriteAsync is idempotentWrite, returning once the write is submitted.
func (s *Store) idempotentWriteAsync(ctx context.Context, kind opKind, w opsrun.IdempotentWrite) *Future[struct{}] {
	var r *async.Request[struct{}]
	r = newRequest(s, kind, func(wctx context.Context) (struct{}, error) {
		if s.writes == nil {
			return struct{}{}, opsrun.IdempotentWrites(wctx, s.env, []opsrun.IdempotentWrite{w})[0]
		}
		it := &writeItem{ctx: ctx, kind: kind, w: w, fut: r.Future()}
		it.hand = r.Future().HandTo(func(ctxErr error) error {
			return &execstore.OutcomeUnknownError{Op: w.Op, ExecutionID: w.ID, Err: ctxErr}
		}, func(err error) { s.stats.record(kind, err) })
		async.Hand(ctx, s.writes, it, it.hand)
		return struct{}{}, async.ErrSettledLater
	})
	ctx = traced(ctx, s, r, kind, w.ID)
	return future(r.Submit(ctx, s.pool, s.shed))
}

func (s *Store) flushWrites(items []*writeItem) {
	live, ctxs := async.TakeLive(s.stop, items, func(it *writeItem) context.Context { return it.ctx },
		func(it *writeItem) *async.Handoff { return it.hand })
	if len(live) == 0 {
		return
	}
	ctx, release := async.AllDone(s.stop, ctxs)
	defer release()
	ctx = withOperation(ctx, live[0].kind)
	writes := make([]opsrun.IdempotentWrite, len(live))
	for i, it := range live {
		writes[i] = it.w
	}
	s.stats.coalesced.Add(1)
	s.stats.coalescedOps.Add(int64(len(live)))
	errs := opsrun.IdempotentWrites(ctx, s.env, writes)
	for i, it := range live {
		s.settleWrite(it, async.CallerCause(it.ctx, errs[i]))
	}
}

func (s *Store) settleWrite(it *writeItem, err error) {
	if !it.hand.Settle() {
		return
	}
	s.stats.record(it.kind, err)
	it.fut.Set(struct{}{}, err)
}

// readAbandoned is the error of a read whose caller gave up after it was sent.
func readAbandoned(ctxErr error) error { return ctxErr }

// coalescedLoad hands a Load to the load coalescer.
func (s *Store) coalescedLoad(ctx context.Context, id string, epoch uint64, fut *async.Future[*execstore.Execution]) error {
	it := &loadItem{ctx: ctx, id: id, epoch: epoch, load: fut}
	it.hand = fut.HandTo(readAbandoned, func(err error) { s.stats.record(opLoad, err) })
	async.Hand(ctx, s.loads, it, it.hand)
	return async.ErrSettledLater
}

// coalescedLoadForEvent hands a LoadForEvent to the load coalescer (MongoDB only).
func (s *Store) coalescedLoadForEvent(ctx context.Context, id, event string, epoch uint64, fut *async.Future[Loaded]) error {
	it := &loadItem{ctx: ctx, id: id, event: event, epoch: epoch, forEvent: fut}
	it.hand = fut.HandTo(readAbandoned, func(err error) { s.stats.record(opLoadForEvent, err) })
	async.Hand(ctx, s.loads, it, it.hand)
	return async.ErrSettledLater
}

func (s *Store) flushLoads(items []*loadItem) {
	var plain, forEvent, alone []*loadItem
	live, ctxs := async.TakeLive(s.stop, items, func(it *loadItem) context.Context { return it.ctx },
		func(it *loadItem) *async.Handoff { return it.hand })
	seen := map[string]bool{}
	for _, it := range live {
		switch {
		case it.load != nil:
			plain = append(plain, it)
		case seen[it.id]:
			alone = append(alone, it) // the aggregation answers each id once
		default:
			seen[it.id] = true
			forEvent = append(forEvent, it)
		}
	}
	if len(ctxs) == 0 {
		return
	}
	ctx, release := async.AllDone(s.stop, ctxs)
	defer release()
	if len(plain) > 0 {
		ids := make([]string, len(plain))
		for i, it := range plain {
			ids[i] = it.id
		}
		s.stats.coalesced.Add(1)
		s.stats.coalescedOps.Add(int64(len(plain)))
		found, err := opsrun.LoadMany(withOperation(ctx, opLoad), s.env, ids)
		for _, it := range plain {
			s.settleLoad(it, &opsrun.LoadedForEvent{Execution: cloneExecution(found[it.id])}, async.CallerCause(it.ctx, err))
		}
	}
	if len(forEvent) > 0 {
		ids, events := make([]string, len(forEvent)), make([]string, len(forEvent))
		for i, it := range forEvent {
			ids[i], events[i] = it.id, it.event
		}
		s.stats.coalesced.Add(1)
		s.stats.coalescedOps.Add(int64(len(forEvent)))
		found, err := opsrun.LoadForEvents(withOperation(ctx, opLoadForEvent), s.env, ids, events)
		for _, it := range forEvent {
			l := found[it.id]
			s.settleLoad(it, &l, async.CallerCause(it.ctx, err))
		}
	}
	for _, it := range alone {
		exe, hit, err := opsrun.LoadForEvent(withOperation(it.ctx, opLoadForEvent), s.env, it.id, it.event)
		s.settleLoad(it, &opsrun.LoadedForEvent{Execution: exe, Processed: hit}, err)
	}
}

// cloneExecution gives each caller an execution of its own when several loaded the same id.
func cloneExecution(e *execstore.Execution) *execstore.Execution {
	if e == nil {
		return nil
	}
	c := *e
	c.Data = bytes.Clone(e.Data)
	return &c
}

func (s *Store) settleLoad(it *loadItem, l *opsrun.LoadedForEvent, err error) {
	s.remember(l.Execution, processedEvent(it.event, l.Processed), it.epoch, err)
	if !it.hand.Settle() {
		return
	}
	if it.load != nil {
		s.stats.record(opLoad, err)
		var exe *execstore.Execution
		if err == nil {
			exe = l.Execution
		}
		it.load.Set(exe, err)
		return
	}
	s.stats.record(opLoadForEvent, err)
	var out Loaded
	if err == nil {
		out = Loaded{Execution: l.Execution, Processed: l.Processed}
	}
	it.forEvent.Set(out, err)
}
