package ops

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/server"
)

// The partitioned scans' finds, exactly: the partitions in increasing order (null beside
// partition 0, for documents written without one), then the scan's own condition, its sort
// and the index it is hinted to.
func TestPartitionedScanCommands(t *testing.T) {
	in := func(v ...any) bson.E {
		return bson.E{Key: "partition", Value: bson.D{{Key: "$in", Value: bson.A(v)}}}
	}
	assert.Equal(t, Scan{
		Filter: bson.D{in(int32(0), int32(2), int32(5), nil), {Key: "outbox_n", Value: bson.D{{Key: "$gt", Value: 0}}}},
		Hint:   "pending_outbox_by_partition",
	}, PendingOutboxScan([]int{5, 0, 2}))
	assert.Equal(t, Scan{
		Filter: bson.D{in(int32(7)), {Key: "spawns_n", Value: bson.D{{Key: "$gt", Value: 0}}}},
		Hint:   "pending_spawns_by_partition",
	}, PendingSpawnsScan([]int{7}))
	assert.Equal(t, Scan{
		Filter: bson.D{in(int32(1), int32(3)), {Key: "timer_min", Value: bson.D{{Key: "$exists", Value: true}, {Key: "$lte", Value: 100.0}}}},
		Sort:   bson.D{{Key: "timer_min", Value: 1}},
		Hint:   "pending_timers_by_partition",
	}, DueScan([]int{3, 1}, unixAt(100)))
	assert.Equal(t, bson.E{Key: "partition", Value: bson.D{{Key: "$in", Value: bson.A{}}}}, InPartitions(nil))
}

// Each scan is hinted to an index of Indexes whose first key is the partition and whose
// second is the field the scan's own condition is on, partial on a condition the scan's
// implies; the indexes of the scans without partitions, and those Indexes replaced, are
// obsolete.
func TestScansHaveTheirIndexes(t *testing.T) {
	keys := map[string]IndexSpec{}
	for _, spec := range Indexes() {
		keys[spec.Name] = spec
	}
	implied := map[string]bson.D{
		IndexPendingOutbox: {{Key: "outbox_n", Value: bson.D{{Key: "$gt", Value: 0}}}},
		IndexPendingSpawns: {{Key: "spawns_n", Value: bson.D{{Key: "$gt", Value: 0}}}},
		IndexPendingTimers: {{Key: "timer_min", Value: bson.D{{Key: "$exists", Value: true}}}},
	}
	for _, scan := range []Scan{PendingOutboxScan([]int{0}), PendingSpawnsScan([]int{0}), DueScan([]int{0}, unixAt(1))} {
		spec, ok := keys[scan.Hint]
		require.True(t, ok, "no index %s", scan.Hint)
		require.Len(t, spec.Key, 2)
		assert.Equal(t, bson.E{Key: "partition", Value: 1}, spec.Key[0], scan.Hint)
		assert.Equal(t, bson.E{Key: scan.Filter[1].Key, Value: 1}, spec.Key[1], scan.Hint)
		assert.Equal(t, implied[scan.Hint], spec.Partial, scan.Hint)
	}
	for _, old := range ObsoleteIndexes() {
		assert.NotContains(t, keys, old)
	}
}

// A created document stores its partition; an update never names it.
func TestBuildCommitStoresThePartitionAtCreation(t *testing.T) {
	l := Layout{Profile: server.MongoDB, TraceMax: 10, Partitions: 16}
	exe := &execstore.Execution{ID: "x", DefinitionID: "d", Status: execstore.Running}
	p, err := BuildCommit(l, exe, fullCommit(), Seqs{Outbox: []int64{1, 2}, Spawns: []int64{1}})
	require.NoError(t, err)
	assert.Equal(t, bson.E{Key: "partition", Value: int32(execstore.PartitionOf("x", 16))}, p.Insert[len(p.Insert)-1])

	exe.Version = 1
	p, err = BuildCommit(l, exe, fullCommit(), Seqs{Outbox: []int64{3, 4}, Spawns: []int64{2}})
	require.NoError(t, err)
	assert.NotContains(t, bson.Raw(mustMarshalD(t, p.Update)).String(), `"partition"`)
	assert.NotContains(t, bson.Raw(mustMarshalD(t, p.Filter)).String(), `"partition"`)

	exe.Version = 0
	p, err = BuildCommit(Layout{Profile: server.MongoDB, TraceMax: 10}, exe, fullCommit(), Seqs{Outbox: []int64{1, 2}, Spawns: []int64{1}})
	require.NoError(t, err)
	assert.NotContains(t, bson.Raw(mustMarshalD(t, p.Insert)).String(), `"partition"`, "Layout.Partitions 0 stores none")
}

// The commands that give a document written without a partition its own, and that record
// the number of partitions.
func TestPartitionAssignmentCommands(t *testing.T) {
	filter, update := AssignPartitionCommand("x", 16)
	assert.Equal(t, bson.D{{Key: "_id", Value: "x"}, {Key: "partition", Value: bson.D{{Key: "$exists", Value: false}}}}, filter)
	assert.Equal(t, bson.D{{Key: "$set", Value: bson.D{{Key: "partition", Value: int32(execstore.PartitionOf("x", 16))}}}}, update)
	assert.Equal(t, bson.D{{Key: "_id", Value: "partitions/executions"}, {Key: "partitions", Value: int32(64)}},
		PartitionsDocument(ExecutionsCollection, 64))
}

func mustMarshalD(t *testing.T, d bson.D) []byte {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}
