package aio_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/ops"
)

// The retention's scan of partition 3 of 8 (ops.ExpiredScan, as the store sends it) over 64
// finished executions and 64 running ones is served as the server's explain shows: on
// FerretDB 1.x a SCAN of the table (it uses no secondary index); on DocumentDB an index scan
// of ops.IndexFinished whose condition holds the partition; on MongoDB an IXSCAN of it that
// examines as many documents as it returns. Only finished executions are in the index.
func TestExpiredScanExplain(t *testing.T) {
	const n, part = 8, 3
	h := newHarness(t, aio.Options{Partitions: n})
	inPart := 0
	for i := range 64 {
		id := fmt.Sprintf("f%02d", i)
		if execstore.PartitionOf(id, n) == part {
			inPart++
		}
		exe := newExe(id)
		exe.Status = execstore.Done
		mustCommit(t, h.store, exe, execstore.Commit{})
		mustCommit(t, h.store, newExe(fmt.Sprintf("r%02d", i)), execstore.Commit{})
	}
	require.Positive(t, inPart)
	scan := ops.ExpiredScan([]int{part}, map[execstore.Status]time.Time{execstore.Done: time.Now().Add(time.Hour)})
	require.Nil(t, scan.Sort, "unsorted: it stops at its limit")
	find := bson.D{{Key: "find", Value: ops.ExecutionsCollection}, {Key: "filter", Value: scan.Filter},
		{Key: "hint", Value: scan.Hint}}
	raw, err := h.db.RunCommand(bg, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "executionStats"}}).Raw()
	require.NoError(t, err)
	switch {
	case lookup(raw, "serverInfo", "ferretdbVersion").Type != 0:
		plan := fmt.Sprint(lookup(raw, "queryPlanner", "Plan"))
		assert.Contains(t, plan, "SCAN")
	case lookup(raw, "queryPlanner", "Plan", "Node Type").Type != 0:
		node := findNode(lookup(raw, "queryPlanner", "Plan"), "Index Name", ops.IndexFinished)
		require.NotNil(t, node, "no node scans %s: %s", ops.IndexFinished, raw)
		cond := node.Lookup("Index Cond").StringValue()
		assert.Contains(t, cond, bsonHex(ops.FieldPartition)+"0003000000", "the index condition lacks partition 3: %s", cond)
	default:
		stage := findNode(lookup(raw, "queryPlanner", "winningPlan"), "indexName", ops.IndexFinished)
		require.NotNil(t, stage, "no stage scans %s", ops.IndexFinished)
		assert.Equal(t, "IXSCAN", stage.Lookup("stage").StringValue())
		assert.EqualValues(t, inPart, lookup(raw, "executionStats", "nReturned").AsInt64())
		assert.EqualValues(t, inPart, lookup(raw, "executionStats", "totalDocsExamined").AsInt64())
	}
	got, err := h.store.ExpiredIn(bg, []int{part}, map[execstore.Status]time.Time{execstore.Done: time.Now().Add(time.Hour)}, 0)
	require.NoError(t, err)
	assert.Len(t, got, inPart, "the finished executions of the partition, not the running ones")
}
