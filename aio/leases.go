package aio

import (
	"context"
	"errors"
	"sync"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/server"
)

// leaseStoreWorkers bounds the calls in flight of the lease store LeaseStore opens, when the
// store has no shared pool: a relay without a lease sends one call at a time.
const leaseStoreWorkers = 4

// leasesSuffix names LeaseStore's collection after the executions collection.
const leasesSuffix = "_leases"

// leaseStore is the idem store LeaseStore opens on first use, and Close closes.
type leaseStore struct {
	mu     sync.Mutex // held while the store is opened and closed
	st     *idem.Store
	closed bool
}

// LeaseStore returns an idem store on the store's own client and database, in the collection
// named after the executions collection with "_leases" appended ("executions_leases" by
// default): one per executions collection. It is the lease store a Relay or Sweeper of package relay without
// Options.Lease claims its one key in, so that two of them on one database do not both
// deliver: one stands by (see package relay). A program may give it to relays as their
// Options.Lease too.
//
// The first call opens it (idem.OpenClient: a few commands, bounded by ctx and
// Connection.ConnectTimeout); a failed opening is tried again by the next call. Later calls
// return the same store. It runs its calls on Connection.Pool when one is set, else on a pool
// of its own of 4 workers. It uses the store's write and read concerns, settle timeout,
// logger and telemetry providers. Close closes it, before it disconnects the client. A call
// after Close returns execstore.ErrClosed.
//
// The relays of one executions collection find each other there, and those of another
// collection (Connection.Collection) of the same database do not stand by for them.
func (s *Store) LeaseStore(ctx context.Context) (*idem.Store, error) {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	switch {
	case s.leases.closed || s.closing.Load():
		return nil, execstore.ErrClosed
	case s.leases.st != nil:
		return s.leases.st, nil
	case s.client == nil:
		return nil, errors.New("aio: the store has no server to keep leases on")
	}
	conn := server.Connection{Database: s.opts.Database, Collection: s.opts.Collection + leasesSuffix, Pool: s.opts.Pool,
		ConnectTimeout: s.opts.ConnectTimeout, WriteConcern: s.opts.WriteConcern, ReadConcern: s.opts.ReadConcern,
		SettleTimeout: s.opts.SettleTimeout, Logger: s.opts.Logger,
		TracerProvider: s.opts.TracerProvider, MeterProvider: s.opts.MeterProvider}
	if conn.Pool == nil {
		conn.Workers = leaseStoreWorkers
	}
	st, err := idem.OpenClient(ctx, s.client, idem.Options{Connection: conn})
	if err != nil {
		return nil, err
	}
	s.leases.st = st
	return st, nil
}

// closeLeases closes the store LeaseStore opened, if any; later calls of it return
// execstore.ErrClosed.
func (s *Store) closeLeases(ctx context.Context) error {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	s.leases.closed = true
	if s.leases.st == nil {
		return nil
	}
	return s.leases.st.Close(ctx)
}
