package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
)

// finalLoads bounds the loads the end-of-run checks run at once.
const finalLoads = 16

// apiStore is the engine workload's calls made on an execstore.Store, the module's public
// interface: what the aio variants (aioStore) and the memory variant (memStore) share. Each
// of those embeds it and adds how its store is opened and what is counted of it.
type apiStore struct {
	store execstore.Store // the handlers' store; nil until opened
	// bg, when set, is a second store on the same database, with a client of its own, that
	// serves the relay, the sweeper and the end-of-run reads; nil: store serves them too.
	bg execstore.Store
}

// relayStore is the store of the relay, the sweeper and the end-of-run reads.
func (s *apiStore) relayStore() execstore.Store {
	if s.bg != nil {
		return s.bg
	}
	return s.store
}

func (s *apiStore) close(ctx context.Context) error {
	var err error
	if s.bg != nil {
		err = s.bg.Close(ctx)
	}
	if s.store != nil {
		err = errors.Join(err, s.store.Close(ctx))
	}
	return err
}

func (s *apiStore) loadForEvent(ctx context.Context, id, eventID string) (*execstore.Execution, bool, error) {
	return s.store.LoadForEvent(ctx, id, eventID)
}

func (s *apiStore) commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) error {
	_, err := s.store.Commit(ctx, exe, c)
	return err
}

func (s *apiStore) pendingOutbox(ctx context.Context, limit int) ([]pendingEntry, error) {
	entries, err := s.relayStore().PendingOutbox(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]pendingEntry, len(entries))
	for i, e := range entries {
		out[i] = pendingEntry{OutboxEntry: e}
	}
	return out, nil
}

// final loads every execution (its TraceNext counts the trace steps recorded), the whole
// pending outbox and the timers due by horizon.
func (s *apiStore) final(ctx context.Context, ids []string, horizon time.Time) (finalState, error) {
	st := finalState{exes: make([]storedExecution, len(ids))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(finalLoads)
	for i, id := range ids {
		g.Go(func() error {
			exe, err := s.relayStore().Load(gctx, id)
			if err != nil {
				return fmt.Errorf("loading %s: %w", id, err)
			}
			st.exes[i] = storedExecution{id: id}
			if exe != nil {
				st.exes[i] = storedExecution{id: id, found: true, version: exe.Version, data: exe.Data, traced: exe.TraceNext}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return st, err
	}
	var err error
	if st.pending, err = s.pendingOutbox(ctx, 0); err != nil {
		return st, err
	}
	if st.timers, err = s.relayStore().DueTimers(ctx, horizon, 0); err != nil {
		return st, err
	}
	return st, nil
}
