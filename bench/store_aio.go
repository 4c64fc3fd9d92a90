package main

import (
	"context"
	"fmt"

	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"golang.org/x/sync/errgroup"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
)

// finalLoads bounds the loads the end-of-run checks run at once.
const finalLoads = 16

// aioStore is the module's asynchronous store as the engine workload uses it: the aio
// variant, with group commit and the coalescing of acks and loads off, so that every call is
// its own command, and the aio+batch variant, with the store's defaults (both on).
type aioStore struct {
	label    string
	uri      string
	database string
	batch    bool
	cmds     *commandCounter
	store    *aio.Store
}

func newAIOStore(label, uri, database string, batch bool) *aioStore {
	return &aioStore{label: label, uri: uri, database: database, batch: batch, cmds: newCommandCounter()}
}

func (s *aioStore) name() string { return s.label }

func (s *aioStore) open(ctx context.Context) error {
	st, err := aio.Open(ctx, s.uri, aio.Options{
		Database:           s.database,
		DisableGroupCommit: !s.batch,
		DisableCoalescing:  !s.batch,
		ClientOptions:      options.Client().SetMonitor(s.cmds.monitor()),
	})
	if err != nil {
		return err
	}
	s.store = st
	return nil
}

func (s *aioStore) close(ctx context.Context) error {
	if s.store == nil {
		return nil
	}
	return s.store.Close(ctx)
}

func (s *aioStore) commands() commandCounts { return s.cmds.snapshot() }

// counts reports the store's group commits (bulk writes issued, commits they carried) and
// its calls by operation ("op_commit", "op_delete_timer", …).
func (s *aioStore) counts() map[string]int64 {
	if s.store == nil {
		return nil
	}
	st := s.store.Stats()
	c := map[string]int64{"group_commits": st.GroupCommits, "grouped_commits": st.GroupedCommits}
	for name, op := range st.Ops {
		if op.Calls > 0 {
			c["op_"+name] = op.Calls
		}
	}
	return c
}

func (s *aioStore) loadForEvent(ctx context.Context, id, eventID string) (*execstore.Execution, bool, error) {
	return s.store.LoadForEvent(ctx, id, eventID)
}

func (s *aioStore) commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) error {
	_, err := s.store.Commit(ctx, exe, c)
	return err
}

func (s *aioStore) pendingOutbox(ctx context.Context, limit int) ([]pendingEntry, error) {
	entries, err := s.store.PendingOutbox(ctx, limit)
	if err != nil {
		return nil, err
	}
	out := make([]pendingEntry, len(entries))
	for i, e := range entries {
		out[i] = pendingEntry{OutboxEntry: e}
	}
	return out, nil
}

func (s *aioStore) ackOutbox(ctx context.Context, e pendingEntry) error {
	return s.store.AckOutbox(ctx, e.SourceID, e.Seq)
}

// concurrentAcks is true: the store takes concurrent calls, and with coalescing on sends the
// acks of one scan as one bulk write.
func (s *aioStore) concurrentAcks() bool { return true }

func (s *aioStore) dueTimers(ctx context.Context, now float64, limit int) ([]execstore.DueTimer, error) {
	return s.store.DueTimers(ctx, now, limit)
}

func (s *aioStore) deleteTimer(ctx context.Context, t execstore.DueTimer) (bool, error) {
	return s.store.DeleteTimer(ctx, t.ExecutionID, t.Path, t.FireAt)
}

// final loads every execution (its trace_next counts the trace steps recorded), the whole
// pending outbox and the timers due by horizon.
func (s *aioStore) final(ctx context.Context, ids []string, horizon float64) (finalState, error) {
	st := finalState{exes: make([]storedExecution, len(ids))}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(finalLoads)
	for i, id := range ids {
		g.Go(func() error {
			exe, err := s.store.Load(gctx, id)
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
	if st.timers, err = s.store.DueTimers(ctx, horizon, 0); err != nil {
		return st, err
	}
	return st, nil
}
