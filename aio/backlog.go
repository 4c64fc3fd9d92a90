package aio

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/opsrun"
)

// Backlog returns the work waiting in each partition of the store's collection now, by this
// process's clock: pending entries and intents with the oldest one's commit time, due timers
// with the earliest fire time among them, and dead items. Partitions with nothing waiting are
// left out; the rest come in partition order. Cost: one aggregation on a server that has its
// operators (MongoDB, DocumentDB), else one find that reads the documents with work waiting
// whole (FerretDB 1.x); either reads only those documents where the pending-work indexes
// serve the filter.
func (s *Store) Backlog(ctx context.Context) ([]execstore.PartitionBacklog, error) {
	return submit(ctx, s, opBacklog, "", func(ctx context.Context) ([]execstore.PartitionBacklog, error) {
		return opsrun.Backlog(ctx, s.env, time.Now())
	}).Wait(ctx)
}
