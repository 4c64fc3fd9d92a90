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
// store has no shared pool: a Relay and a Sweeper each send a claim or a renewal at a time,
// and more when a program gives it to them as their Options.Lease.
const leaseStoreWorkers = 8

// leasesSuffix names LeaseStore's database after the store's.
const leasesSuffix = "_leases"

// leaseStore is the idem store LeaseStore opens on first use, and Close closes.
type leaseStore struct {
	mu     sync.Mutex // held while the store is opened and closed
	st     *idem.Store
	closed bool
}

// LeaseStore returns an idem store on the store's own client, in the database named after the
// store's with "_leases" appended, in the collection named as the executions collection
// ("shop_leases.executions" for the default collection of database "shop"): one per
// executions collection. A Relay or Sweeper of package relay without Options.Lease holds its
// one sole lease there, so that of those of every process on the collection one delivers and
// the others stand by (see package relay). A program may give it to relays as their
// Options.Lease too, to share the partitions. A database of its own keeps its writes from
// waiting behind the store's on a server that runs one write per database at a time (the
// embedded server, FerretDB over SQLite): a relay's lease renewals must come back within
// LeaseDuration×2/3 however busy the store is.
//
// The first call opens it (idem.OpenClient: a few commands, bounded by ctx and
// Connection.ConnectTimeout); a failed opening is tried again by the next call. Later calls
// return the same store. It runs its calls on Connection.Pool when one is set, else on a pool
// of its own of 8 workers. It uses the store's write and read concerns, settle timeout,
// logger and telemetry providers. Close closes it, before it disconnects the client. A call
// after Close returns execstore.ErrClosed.
//
// The relays of one executions collection find each other there, and those of another
// collection (Connection.Collection) of the same database keep out of their way.
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
	conn := server.Connection{Database: s.opts.Database + leasesSuffix, Collection: s.opts.Collection, Pool: s.opts.Pool,
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
