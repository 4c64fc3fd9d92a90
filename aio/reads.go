package aio

import (
	"context"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/async"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/opsrun"
	"github.com/execstore/execstore/server"
)

// Load returns the execution, or (nil, nil) when there is none.
func (s *Store) Load(ctx context.Context, id string) (*execstore.Execution, error) {
	if err := contract.ValidateID("id", id); err != nil {
		return nil, err
	}
	epoch := s.cacheMark()
	var r *async.Request[*execstore.Execution]
	r = newRequest(s, opLoad, func(wctx context.Context) (*execstore.Execution, error) {
		if s.loads != nil && s.env.Profile == server.MongoDB {
			return nil, s.coalescedLoad(ctx, id, epoch, r.Future())
		}
		exe, err := opsrun.Load(wctx, s.env, id)
		s.remember(exe, "", epoch, err)
		return exe, err
	})
	ctx = traced(ctx, s, r, opLoad, id)
	return r.Submit(ctx, s.pool, s.shed).Wait(ctx)
}

// Loaded is the result of LoadForEvent.
type Loaded struct {
	Execution *execstore.Execution // nil for an unknown id
	Processed bool                 // eventID is already in the dedupe set
}

// LoadForEvent returns the execution and whether eventID was already processed, in one round
// trip (see execstore.Store).
//
// With the snapshot cache on (Options.CacheSize), an execution the cache holds is answered
// from memory, with no server command. The snapshot is the one this process last committed or
// read. Processed is true for the events the cache knows are in the dedupe set: those this
// process committed on the execution, and those a read found there. Any other event is
// reported not processed. If it was processed, the commit refuses it with
// execstore.ErrAlreadyProcessed. If the snapshot is stale, the commit refuses it with a
// *execstore.ConflictError, and the next LoadForEvent reads the server.
func (s *Store) LoadForEvent(ctx context.Context, id, eventID string) (*execstore.Execution, bool, error) {
	l, err := s.LoadForEventAsync(ctx, id, eventID).Wait(ctx)
	return l.Execution, l.Processed, err
}

// LoadForEventAsync submits LoadForEvent and returns at once.
func (s *Store) LoadForEventAsync(ctx context.Context, id, eventID string) *Future[Loaded] {
	if err := contract.ValidateID("id", id); err != nil {
		return future(async.Failed[Loaded](err))
	}
	if err := contract.ValidateID("eventID", eventID); err != nil {
		return future(async.Failed[Loaded](err))
	}
	if s.cache != nil && !s.closing.Load() && ctx.Err() == nil {
		if exe, processed, ok := s.cache.lookup(id, eventID); ok {
			s.stats.record(opLoadForEvent, nil)
			return future(async.Ready(Loaded{Execution: exe, Processed: processed}))
		}
	}
	epoch := s.cacheMark()
	var r *async.Request[Loaded]
	r = newRequest(s, opLoadForEvent, func(wctx context.Context) (Loaded, error) {
		if s.loads != nil && s.env.Profile == server.MongoDB {
			return Loaded{}, s.coalescedLoadForEvent(ctx, id, eventID, epoch, r.Future())
		}
		exe, hit, err := opsrun.LoadForEvent(wctx, s.env, id, eventID)
		s.remember(exe, processedEvent(eventID, hit), epoch, err)
		return Loaded{Execution: exe, Processed: hit}, err
	})
	ctx = traced(ctx, s, r, opLoadForEvent, id)
	return future(r.Submit(ctx, s.pool, s.shed))
}

// IsProcessed reports whether eventID is in the execution's dedupe set.
func (s *Store) IsProcessed(ctx context.Context, id, eventID string) (bool, error) {
	if err := contract.ValidateID("id", id); err != nil {
		return false, err
	}
	if err := contract.ValidateID("eventID", eventID); err != nil {
		return false, err
	}
	return submit(ctx, s, opIsProcessed, id, func(ctx context.Context) (bool, error) {
		return opsrun.IsProcessed(ctx, s.env, id, eventID)
	}).Wait(ctx)
}

// List returns one page of summaries; see execstore.Store.
func (s *Store) List(ctx context.Context, q execstore.ListQuery) (execstore.Page, error) {
	if err := contract.ValidateListQuery(&q); err != nil {
		return execstore.Page{}, err
	}
	if _, err := contract.DecodeCursor(q.Cursor); err != nil {
		return execstore.Page{}, err
	}
	return submit(ctx, s, opList, "", func(ctx context.Context) (execstore.Page, error) {
		return opsrun.List(ctx, s.env, q)
	}).Wait(ctx)
}
