package aio_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/ops"
)

// Each targeted read (execstore.Targeted) is served as the server's explain shows, asserted
// for the server the suite runs on, over 64 executions that each hold an outbox entry and a
// due timer, and 64 with nothing pending; the read names three of the first.
//
//   - FerretDB 1.x (the embedded server, SQLite): a read of several is not pushed down (that
//     server pushes down an _id equal to one value, not an $in) and the plan is a SCAN of the
//     collection's table, as for a scan of the partitions there: one command either way. A
//     read of one, by equality, is pushed down.
//   - DocumentDB (FerretDB 2.x): an Index Scan of the _id index whose index condition holds
//     the three ids, and no scan of a pending-work index.
//   - MongoDB: an IXSCAN of the _id index, and as many documents examined as named.
func TestTargetedReadsExplain(t *testing.T) {
	h := newHarness(t, aio.Options{})
	for i := range 64 {
		mustCommit(t, h.store, newExe(fmt.Sprintf("x%02d", i)), execstore.Commit{
			Emits:  []execstore.Emit{{Event: []byte("e")}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", time.Unix(1000, 0))}})
		mustCommit(t, h.store, newExe(fmt.Sprintf("idle%02d", i)), execstore.Commit{})
	}
	for _, ids := range [][]string{{"x07", "x19", "x42"}, {"x19"}} {
		explainTargeted(t, h, ids)
	}
}

// explainTargeted asserts how the server serves the targeted reads of ids.
func explainTargeted(t *testing.T, h *harness, ids []string) {
	for name, scan := range map[string]ops.Scan{"outbox": ops.PendingOutboxScanOf(ids), "timers": ops.DueScanOf(ids, time.Unix(2000, 0))} {
		t.Run(fmt.Sprintf("%s of %d", name, len(ids)), func(t *testing.T) {
			find := bson.D{{Key: "find", Value: ops.ExecutionsCollection}, {Key: "filter", Value: scan.Filter}}
			if scan.Sort != nil {
				find = append(find, bson.E{Key: "sort", Value: scan.Sort})
			}
			find = append(find, bson.E{Key: "hint", Value: scan.Hint})
			raw, err := h.db.RunCommand(bg, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "executionStats"}}).Raw()
			require.NoError(t, err)
			switch {
			case lookup(raw, "serverInfo", "ferretdbVersion").Type != 0 && len(ids) == 1:
				assert.True(t, lookup(raw, "filterPushdown").Boolean(), "FerretDB 1.x did not push the filter down: %s", raw)
			case lookup(raw, "serverInfo", "ferretdbVersion").Type != 0:
				assert.False(t, lookup(raw, "filterPushdown").Boolean(), "FerretDB 1.x pushed the filter down")
				assert.Contains(t, fmt.Sprint(lookup(raw, "queryPlanner", "Plan")), "SCAN")
			case lookup(raw, "queryPlanner", "Plan", "Node Type").Type != 0:
				plan := lookup(raw, "queryPlanner", "Plan")
				node := findNode(plan, "Index Name", ops.IndexID)
				require.NotNil(t, node, "no node scans %s: %s", ops.IndexID, raw)
				assert.Equal(t, "Index Scan", node.Lookup("Node Type").StringValue())
				cond := node.Lookup("Index Cond").StringValue()
				for _, id := range ids {
					// The id as a BSON string value: length, bytes, NUL.
					assert.Contains(t, strings.ToUpper(cond), fmt.Sprintf("04000000%X00", id), "the index condition lacks %s: %s", id, cond)
				}
				for _, index := range []string{ops.IndexPendingOutbox, ops.IndexPendingSpawns, ops.IndexPendingTimers} {
					assert.Nil(t, findNode(plan, "Index Name", index), "the read scans %s", index)
				}
			default:
				stage := findNode(lookup(raw, "queryPlanner", "winningPlan"), "indexName", ops.IndexID)
				require.NotNil(t, stage, "no stage scans %s", ops.IndexID)
				assert.Equal(t, "IXSCAN", stage.Lookup("stage").StringValue())
				assert.EqualValues(t, len(ids), lookup(raw, "executionStats", "totalDocsExamined").AsInt64())
			}
		})
	}
}
