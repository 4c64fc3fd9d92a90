package memstore_test

import (
	"testing"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/storetest"
)

// The shared conformance suite: the in-memory store keeps the contract the MongoDB store keeps.
func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) execstore.Store { return open(t, memstore.Options{}) })
}

// The trace and dedupe windows of the shared suite.
func TestConformanceWindows(t *testing.T) {
	storetest.RunWindows(t, func(t *testing.T, w storetest.Windows) execstore.Store {
		return open(t, memstore.Options{TraceMax: w.TraceMax, DedupeWindow: w.DedupeWindow})
	})
}

// open returns a new store closed when t ends.
func open(t *testing.T, opts memstore.Options) execstore.Store {
	s := memstore.New(opts)
	t.Cleanup(func() { _ = s.Close(bg) })
	return s
}

// The shared suite of two stores over the same data: for memstore that is one store, as one
// process's memory is.
func TestConformanceShared(t *testing.T) {
	storetest.RunShared(t, func(t *testing.T) (first, second execstore.Store) {
		s := open(t, memstore.Options{})
		return s, s
	})
}

// The partitioned scans of the shared suite with 3 partitions, so that each holds several
// executions.
func TestConformanceFewPartitions(t *testing.T) {
	storetest.RunPartitioned(t, func(t *testing.T) execstore.Partitioned {
		return open(t, memstore.Options{Partitions: 3}).(execstore.Partitioned)
	})
}
