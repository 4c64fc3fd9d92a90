package aio_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/ops"
)

// A scan that leaves executions out (execstore.Excluding) is the partitioned scan with
// {_id: {$nin: …}} added: it keeps the scan's index, the ids checked on the documents the
// index selects, as the server's explain shows for the server the suite runs on (see
// TestPartitionedScansExplain for each server's plan). On MongoDB, the executions left out
// are examined but not returned.
func TestExcludingScansExplain(t *testing.T) {
	var except []string
	for i := range 64 {
		if id := fmt.Sprintf("x%02d", i); execstore.PartitionOf(id, 8) == 3 && i%2 == 0 {
			except = append(except, id)
		}
	}
	require.NotEmpty(t, except)
	explains, inPart, _ := explainScans(t, func(s ops.Scan) ops.Scan {
		out := ops.Except(s, except)
		require.Len(t, out.Filter, len(s.Filter)+1, "Except adds one condition")
		assert.Equal(t, s.Hint, out.Hint, "Except keeps the scan's index")
		return out
	})
	for index, raw := range explains {
		t.Run(index, func(t *testing.T) {
			switch {
			case lookup(raw, "serverInfo", "ferretdbVersion").Type != 0:
				assert.Contains(t, fmt.Sprint(lookup(raw, "queryPlanner", "Plan")), "SCAN")
			case lookup(raw, "queryPlanner", "Plan", "Node Type").Type != 0:
				require.NotNil(t, findNode(lookup(raw, "queryPlanner", "Plan"), "Index Name", index), "no node scans %s", index)
			default:
				stage := findNode(lookup(raw, "queryPlanner", "winningPlan"), "indexName", index)
				require.NotNil(t, stage, "no stage scans %s", index)
				assert.Equal(t, "IXSCAN", stage.Lookup("stage").StringValue())
				assert.EqualValues(t, inPart-len(except), lookup(raw, "executionStats", "nReturned").AsInt64())
				assert.EqualValues(t, inPart, lookup(raw, "executionStats", "totalDocsExamined").AsInt64())
			}
		})
	}
}

// Except adds {_id: {$nin: ids}}, the ids in increasing order, and nothing for no ids.
func TestExceptCommand(t *testing.T) {
	scan := ops.PendingOutboxScan([]int{1})
	assert.Equal(t, scan, ops.Except(scan, nil))
	got := ops.Except(scan, []string{"b", "a"})
	assert.Equal(t, append(append(bson.D{}, scan.Filter...), bson.E{Key: "_id", Value: bson.D{{Key: "$nin", Value: bson.A{"a", "b"}}}}), got.Filter)
	assert.Len(t, scan.Filter, len(got.Filter)-1, "the scan given is left as it was")
}
