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

// explainScans runs explain (executionStats) of each partitioned scan of partition 3 of 8,
// as the store sends it (ops.PendingOutboxScan, ops.PendingSpawnsScan, ops.DueScan: filter,
// sort, hint), over 64 executions that each hold an outbox entry, a spawn intent and a due
// timer, and 64 with nothing pending. It returns each explain's answer by the scan's index,
// how many executions with something pending are in partition 3, and the partial filter of
// each index built partial. wrap (nil: none) changes each scan before it is explained.
func explainScans(t *testing.T, wrap func(ops.Scan) ops.Scan) (map[string]bson.Raw, int, map[string]bson.D) {
	const n, part = 8, 3
	h := newHarness(t, aio.Options{Partitions: n})
	inPart := 0
	for i := range 64 {
		id := fmt.Sprintf("x%02d", i)
		if execstore.PartitionOf(id, n) == part {
			inPart++
		}
		mustCommit(t, h.store, newExe(id), execstore.Commit{
			Emits:  []execstore.Emit{{Event: []byte("e")}},
			Spawns: []execstore.Spawn{{ChildID: id + "/c", RootPath: "R"}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", time.Unix(1000, 0))}})
	}
	require.Positive(t, inPart)
	for i := range 64 { // with nothing pending: in no scan's answer, and in no pending-work index
		mustCommit(t, h.store, newExe(fmt.Sprintf("idle%02d", i)), execstore.Commit{})
	}
	out := map[string]bson.Raw{}
	for _, scan := range []ops.Scan{ops.PendingOutboxScan([]int{part}), ops.PendingSpawnsScan([]int{part}),
		ops.DueScan([]int{part}, time.Unix(2000, 0))} {
		if wrap != nil {
			scan = wrap(scan)
		}
		find := bson.D{{Key: "find", Value: ops.ExecutionsCollection}, {Key: "filter", Value: scan.Filter}}
		if scan.Sort != nil {
			find = append(find, bson.E{Key: "sort", Value: scan.Sort})
		}
		find = append(find, bson.E{Key: "hint", Value: scan.Hint})
		raw, err := h.db.RunCommand(bg, bson.D{{Key: "explain", Value: find}, {Key: "verbosity", Value: "executionStats"}}).Raw()
		require.NoError(t, err, scan.Hint)
		out[scan.Hint] = raw
	}
	cur, err := h.db.Collection(ops.ExecutionsCollection).Indexes().List(bg)
	require.NoError(t, err)
	var specs []struct {
		Name    string `bson:"name"`
		Partial bson.D `bson:"partialFilterExpression"`
	}
	require.NoError(t, cur.All(bg, &specs))
	partials := map[string]bson.D{}
	for _, s := range specs {
		if s.Partial != nil {
			partials[s.Name] = s.Partial
		}
	}
	return out, inPart, partials
}

// Each partitioned scan is served as the server's explain shows, asserted for the server the
// suite runs on.
//
//   - FerretDB 1.x (the embedded server, SQLite): the filter is not pushed down and the plan
//     is a SCAN of the collection's table. Every scan reads every document there, whatever
//     its partition: that server uses no secondary index (see docs/servers.md).
//   - DocumentDB (FerretDB 2.x): a Bitmap Index Scan of the scan's index whose index
//     condition holds the partition and the scan's own condition, or the partition alone
//     where the index is partial on exactly the scan's own condition, so only the documents
//     of that partition with something pending or due are read.
//   - MongoDB: an IXSCAN of the scan's index, and as many documents examined as returned.
func TestPartitionedScansExplain(t *testing.T) {
	explains, inPart, partials := explainScans(t, nil)
	scans := map[string]ops.Scan{}
	for _, scan := range []ops.Scan{ops.PendingOutboxScan([]int{3}), ops.PendingSpawnsScan([]int{3}), ops.DueScan([]int{3}, time.Unix(2000, 0))} {
		scans[scan.Hint] = scan
	}
	for index, raw := range explains {
		t.Run(index, func(t *testing.T) {
			switch {
			case lookup(raw, "serverInfo", "ferretdbVersion").Type != 0:
				assert.False(t, lookup(raw, "filterPushdown").Boolean(), "FerretDB 1.x pushed the filter down")
				plan := fmt.Sprint(lookup(raw, "queryPlanner", "Plan"))
				assert.Contains(t, plan, "SCAN")
				assert.NotContains(t, plan, "INDEX", "FerretDB 1.x used an index")
			case lookup(raw, "queryPlanner", "Plan", "Node Type").Type != 0:
				node := findNode(lookup(raw, "queryPlanner", "Plan"), "Index Name", index)
				require.NotNil(t, node, "no node scans %s", index)
				cond := node.Lookup("Index Cond").StringValue()
				// {partition: 3}: the field's name, its NUL, the int32 3 (little-endian).
				assert.Contains(t, cond, bsonHex(ops.FieldPartition)+"0003000000", "the index condition lacks partition 3: %s", cond)
				// The scan's own condition is in the index condition, or is the index's
				// partial filter exactly, which every entry of the index meets.
				own := map[string]string{ops.IndexPendingOutbox: "outbox_n", ops.IndexPendingSpawns: "spawns_n",
					ops.IndexPendingTimers: ops.FieldTimerMin}[index]
				if !strings.Contains(cond, bsonHex(own)) {
					scan := scans[index]
					assert.Equal(t, fmt.Sprint(scan.Filter[1:]), fmt.Sprint(partials[index]),
						"the index condition lacks %s, and the index is not partial on the scan's condition: %s", own, cond)
				}
			default:
				stage := findNode(lookup(raw, "queryPlanner", "winningPlan"), "indexName", index)
				require.NotNil(t, stage, "no stage scans %s", index)
				assert.Equal(t, "IXSCAN", stage.Lookup("stage").StringValue())
				assert.EqualValues(t, inPart, lookup(raw, "executionStats", "nReturned").AsInt64())
				assert.EqualValues(t, inPart, lookup(raw, "executionStats", "totalDocsExamined").AsInt64())
			}
		})
	}
}

// lookup returns the value at path in doc, the zero value when there is none.
func lookup(doc bson.Raw, path ...string) bson.RawValue {
	v, err := doc.LookupErr(path...)
	if err != nil {
		return bson.RawValue{}
	}
	return v
}

// findNode returns the first sub-document of v, depth first, whose field key is the string
// value, nil when there is none.
func findNode(v bson.RawValue, key, value string) bson.Raw {
	var docs []bson.RawValue
	switch v.Type {
	case bson.TypeEmbeddedDocument:
		doc := v.Document()
		if s, ok := doc.Lookup(key).StringValueOK(); ok && s == value {
			return doc
		}
		elems, _ := doc.Elements()
		for _, e := range elems {
			docs = append(docs, e.Value())
		}
	case bson.TypeArray:
		vals, _ := v.Array().Values()
		docs = vals
	}
	for _, d := range docs {
		if found := findNode(d, key, value); found != nil {
			return found
		}
	}
	return nil
}

// bsonHex is how a field name appears in DocumentDB's plans: inside BSONHEX literals, as
// the hex of its bytes.
func bsonHex(field string) string {
	return strings.ToLower(fmt.Sprintf("%x", field))
}
