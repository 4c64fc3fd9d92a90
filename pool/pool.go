// Package pool is the bounded pool of workers that the module's stores run their operations
// on. Every store (aio, idem, journal) has one of its own by default. A process that opens
// several stores can make one Pool and pass it to each (server.Connection.Pool), so that one
// bound on running and waiting operations holds for all of them.
//
// What always holds:
//   - At most Config.Workers operations run at once, and at most Config.QueueDepth wait for a
//     worker.
//   - A store's blocking call waits for room for as long as its context allows. With
//     server.Connection.ShedLoad it fails at once with execstore.ErrOverloaded instead.
//   - An operation whose context ended while it waited is never run.
//   - Close refuses new operations (execstore.ErrClosed), runs everything already accepted
//     within its context, and leaves no goroutine behind. Close a shared Pool after the stores
//     that use it: a store's Close waits only for its own operations.
//
// Cost: one channel send and one receive per operation, plus a hand-off to a reused worker
// goroutine (sourcegraph/conc's pool).
package pool

import (
	"context"

	"github.com/execstore/execstore/internal/workers"
)

// Config sizes a Pool.
type Config struct {
	Workers    int // operations running at once; default 32
	QueueDepth int // operations waiting for a worker; default 1024
}

// Pool is a bounded set of workers that stores share. Create it with New; the zero value is
// not usable.
type Pool struct {
	p *workers.Pool
}

func init() {
	workers.Public = func(shared any) *workers.Pool {
		if p, ok := shared.(*Pool); ok && p != nil {
			return p.p
		}
		return nil
	}
}

// New returns a running Pool sized by cfg (defaults where a field is 0 or less).
func New(cfg Config) *Pool {
	return &Pool{p: workers.New(workers.Config{Workers: cfg.Workers, QueueDepth: cfg.QueueDepth})}
}

// Close refuses new operations and waits, within ctx, for every accepted one to run. If ctx
// ends first, running operations see their context cancelled, and waiting ones end with
// execstore.ErrClosed. Either way no worker outlives Close.
func (p *Pool) Close(ctx context.Context) error { return p.p.Close(ctx) }

// Len returns the number of operations waiting for a worker.
func (p *Pool) Len() int { return p.p.Len() }

// InFlight returns the number of operations running.
func (p *Pool) InFlight() int { return p.p.InFlight() }
