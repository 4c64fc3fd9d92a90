package main

import (
	"context"

	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/aio"
)

// aioStore is the module's asynchronous store as the engine workload uses it: the aio
// variant, with group commit and the coalescing of acks and loads off, so that every call is
// its own command, and the aio+batch variant, with the store's defaults (both on).
type aioStore struct {
	apiStore
	label    string
	uri      string
	database string
	batch    bool
	cmds     *commandCounter
	aio      *aio.Store // the same store as apiStore's, for its Stats
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
	s.store, s.aio = st, st
	return nil
}

func (s *aioStore) commands() commandCounts { return s.cmds.snapshot() }

// counts reports the store's group commits (bulk writes issued, commits they carried) and
// its calls by operation ("op_commit", "op_delete_timer", …).
func (s *aioStore) counts() map[string]int64 {
	if s.aio == nil {
		return nil
	}
	st := s.aio.Stats()
	c := map[string]int64{"group_commits": st.GroupCommits, "grouped_commits": st.GroupedCommits}
	for name, op := range st.Ops {
		if op.Calls > 0 {
			c["op_"+name] = op.Calls
		}
	}
	return c
}
