package aio

import (
	"context"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/opsrun"
)

// AcksWaiting is how many AckOutbox calls wait for a commit of their source to carry them.
func (s *Store) AcksWaiting() int {
	if s.carrier == nil {
		return 0
	}
	s.carrier.mu.Lock()
	defer s.carrier.mu.Unlock()
	n := 0
	for _, acks := range s.carrier.waiting {
		n += len(acks)
	}
	return n
}

// BacklogByFind is Backlog as a server without the aggregation's operators answers it.
func (s *Store) BacklogByFind(ctx context.Context) ([]execstore.PartitionBacklog, error) {
	return opsrun.BacklogByFind(ctx, s.env, time.Now())
}

// CachedVersion is the version of id the snapshot cache holds, false when it holds none.
func (s *Store) CachedVersion(id string) (int64, bool) {
	if s.cache == nil {
		return 0, false
	}
	s.cache.mu.Lock()
	defer s.cache.mu.Unlock()
	el := s.cache.byID[id]
	if el == nil {
		return 0, false
	}
	return el.Value.(*cacheEntry).exe.Version, true
}
