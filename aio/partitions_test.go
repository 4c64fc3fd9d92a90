package aio_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/ops"
	"github.com/execstore/execstore/server"
	"github.com/execstore/execstore/storetest"
)

// The first Open records the number of partitions; a later Open without one uses it, and one
// that asks for another is refused as invalid, saying both numbers.
func TestPartitionsAreRecordedOnce(t *testing.T) {
	h := newHarness(t, aio.Options{Partitions: 8})
	assert.Equal(t, 8, h.store.Partitions())

	again := h.reopen(t, aio.Options{})
	assert.Equal(t, 8, again.Partitions())

	_, err := aio.Open(bg, srv.URI, aio.Options{Partitions: 16, Connection: h.opts.Connection})
	var ie *execstore.InvalidError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	assert.Equal(t, "Options.Partitions", ie.Field)
	assert.Contains(t, ie.Reason, "records 8 partitions")
	assert.Contains(t, ie.Reason, "asked for 16")

	var doc bson.M
	require.NoError(t, h.db.Collection(ops.CountersCollection).FindOne(bg,
		bson.D{{Key: "_id", Value: "partitions/executions"}}).Decode(&doc))
	assert.EqualValues(t, 8, doc["partitions"])
}

// Without Options.Partitions a new database gets execstore.DefaultPartitions.
func TestPartitionsDefault(t *testing.T) {
	h := newHarness(t, aio.Options{})
	assert.Equal(t, execstore.DefaultPartitions, h.store.Partitions())
}

// An Open refused for its partitions writes nothing else: no index is created on the
// executions collection.
func TestOpenRefusedForPartitionsWritesNothing(t *testing.T) {
	h := newHarness(t, aio.Options{})
	_, err := h.db.Collection(ops.CountersCollection).InsertOne(bg, ops.PartitionsDocument("other", 4))
	require.NoError(t, err)
	conn := h.opts.Connection
	conn.Collection = "other"
	_, err = aio.Open(bg, srv.URI, aio.Options{Partitions: 5, Connection: conn})
	require.ErrorIs(t, err, execstore.ErrInvalid)
	names, err := h.db.ListCollectionNames(bg, bson.D{{Key: "name", Value: "other"}})
	require.NoError(t, err)
	assert.Empty(t, names, "the refused Open created the collection (its indexes)")
}

// A created document stores its partition; a later commit keeps it.
func TestCreatedDocumentKeepsItsPartition(t *testing.T) {
	h := newHarness(t, aio.Options{Partitions: 16})
	for i := range 8 {
		id := fmt.Sprint("p", i)
		exe := newExe(id)
		mustCommit(t, h.store, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}}})
		want := int64(execstore.PartitionOf(id, 16))
		assert.Equal(t, want, rawInt(t, h.rawDoc(t, id), ops.FieldPartition), id)
		mustCommit(t, h.store, exe, execstore.Commit{Emits: []execstore.Emit{{Event: []byte("b")}}})
		assert.Equal(t, want, rawInt(t, h.rawDoc(t, id), ops.FieldPartition), id)
	}
}

// Documents written without a partition (by an earlier version) are in partition 0's scans,
// and the next Open gives each its own. The indexes of the scans without partitions are
// dropped at Open.
func TestOpenAssignsMissingPartitions(t *testing.T) {
	const n = 4
	h := newHarness(t, aio.Options{Partitions: n})
	executions := h.db.Collection(ops.ExecutionsCollection)
	ids := make([]string, 0, 70) // more than one batch
	for i := range cap(ids) {
		id := fmt.Sprintf("old%02d", i)
		ids = append(ids, id)
		mustCommit(t, h.store, newExe(id), execstore.Commit{Emits: []execstore.Emit{{Event: []byte(id)}},
			Timers: []execstore.TimerOp{execstore.ScheduleTimer("T", time.Unix(1000, 0))}})
	}
	_, err := executions.UpdateMany(bg, bson.D{}, bson.D{{Key: "$unset", Value: bson.D{{Key: ops.FieldPartition, Value: ""}}}})
	require.NoError(t, err)
	_, err = executions.Indexes().CreateOne(bg, mongo.IndexModel{Keys: bson.D{{Key: "outbox_n", Value: 1}},
		Options: options.Index().SetName("outbox_pending")})
	require.NoError(t, err)

	// Before the next Open, partition 0 delivers them all, and the others none.
	ctx := context.Background()
	in0, err := h.store.PendingOutboxIn(ctx, []int{0}, 0)
	require.NoError(t, err)
	assert.Len(t, in0, len(ids))
	rest, err := h.store.PendingOutboxIn(ctx, []int{1, 2, 3}, 0)
	require.NoError(t, err)
	assert.Empty(t, rest)
	due0, err := h.store.DueTimersIn(ctx, []int{0}, time.Unix(2000, 0), 0)
	require.NoError(t, err)
	assert.Len(t, due0, len(ids))

	// One document has a partition already, another than its own: Open leaves it.
	kept := int32((execstore.PartitionOf(ids[0], n) + 1) % n)
	_, err = executions.UpdateOne(bg, bson.D{{Key: "_id", Value: ids[0]}}, bson.D{{Key: "$set", Value: bson.D{{Key: ops.FieldPartition, Value: kept}}}})
	require.NoError(t, err)

	again := h.reopen(t, aio.Options{})
	assert.Equal(t, int64(kept), rawInt(t, h.rawDoc(t, ids[0]), ops.FieldPartition), "Open changed a partition")
	for _, id := range ids[1:] {
		assert.Equal(t, int64(execstore.PartitionOf(id, n)), rawInt(t, h.rawDoc(t, id), ops.FieldPartition), id)
	}
	for p := range n {
		got, err := again.PendingOutboxIn(ctx, []int{p}, 0)
		require.NoError(t, err)
		for _, e := range got {
			if e.SourceID != ids[0] {
				assert.Equal(t, p, execstore.PartitionOf(e.SourceID, n), e.SourceID)
			}
		}
	}
	specs, err := executions.Indexes().ListSpecifications(bg)
	require.NoError(t, err)
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
	}
	assert.NotContains(t, names, "outbox_pending")
	assert.Contains(t, names, ops.IndexPendingOutbox)
}

// Open replaces the indexes of the previous version by ops.Indexes, without a manual step:
// the database has exactly those of the previous version (the same keys, whole, under their
// names), and after Open exactly ops.Indexes, each partial where the server builds partial
// indexes, and the scans find what is pending.
func TestOpenReplacesTheIndexesOfTheLastVersion(t *testing.T) {
	const n = 4
	h := newHarness(t, aio.Options{Partitions: n})
	executions := h.db.Collection(ops.ExecutionsCollection)
	for _, spec := range ops.Indexes() {
		require.NoError(t, executions.Indexes().DropOne(bg, spec.Name))
	}
	previous := map[string]bson.D{
		"outbox_by_partition": {{Key: ops.FieldPartition, Value: 1}, {Key: "outbox_n", Value: 1}},
		"spawns_by_partition": {{Key: ops.FieldPartition, Value: 1}, {Key: "spawns_n", Value: 1}},
		"timers_by_partition": {{Key: ops.FieldPartition, Value: 1}, {Key: ops.FieldTimerMin, Value: 1}},
		"list_definition":     {{Key: ops.FieldDefinitionID, Value: 1}, {Key: "_id", Value: 1}},
		"list_status":         {{Key: ops.FieldStatus, Value: 1}, {Key: "_id", Value: 1}},
		"list_parent":         {{Key: ops.FieldParentID, Value: 1}, {Key: "_id", Value: 1}},
	}
	for name, key := range previous {
		_, err := executions.Indexes().CreateOne(bg, mongo.IndexModel{Keys: key, Options: options.Index().SetName(name)})
		require.NoError(t, err, name)
	}
	pending := map[string]bool{}
	for i := range 12 {
		id := fmt.Sprintf("u%02d", i)
		c := execstore.Commit{}
		if i%2 == 0 {
			c.Emits = []execstore.Emit{{Event: []byte(id)}}
			c.Timers = []execstore.TimerOp{execstore.ScheduleTimer("T", time.Unix(1000, 0))}
			pending[id] = true
		}
		mustCommit(t, h.store, newExe(id), c)
	}

	again := h.reopen(t, aio.Options{})
	cur, err := executions.Indexes().List(bg)
	require.NoError(t, err)
	var specs []struct {
		Name    string `bson:"name"`
		Partial bson.D `bson:"partialFilterExpression"`
	}
	require.NoError(t, cur.All(bg, &specs))
	got := map[string]bson.D{}
	for _, s := range specs {
		got[s.Name] = s.Partial
	}
	want := []string{"_id_"}
	for _, spec := range ops.Indexes() {
		want = append(want, spec.Name)
	}
	assert.ElementsMatch(t, want, slices.Collect(maps.Keys(got)), "Open left the indexes %v", slices.Collect(maps.Keys(got)))
	partial := h.store.Server().Family != server.FamilyFerretDB1 // FerretDB 1.x refuses partial indexes
	for _, spec := range ops.Indexes() {
		filter, ok := got[spec.Name]
		if !ok {
			continue
		}
		if partial && spec.Partial != nil {
			assert.Equal(t, fmt.Sprint(spec.Partial), fmt.Sprint(filter), spec.Name)
		} else {
			assert.Nil(t, filter, spec.Name)
		}
	}
	var all []int
	for p := range n {
		all = append(all, p)
	}
	entries, err := again.PendingOutboxIn(bg, all, 0)
	require.NoError(t, err)
	due, err := again.DueTimersIn(bg, all, time.Unix(2000, 0), 0)
	require.NoError(t, err)
	assert.Len(t, entries, len(pending))
	assert.Len(t, due, len(pending))
	for _, e := range entries {
		assert.True(t, pending[e.SourceID], e.SourceID)
	}
}

// A partitioned scan refuses a partition out of range and an empty list returns nothing,
// both with no command sent. A partition named twice counts once.
func TestPartitionedScanChecksBeforeIO(t *testing.T) {
	h := newHarness(t, aio.Options{Partitions: 4})
	mustCommit(t, h.store, newExe("x"), execstore.Commit{Emits: []execstore.Emit{{Event: []byte("a")}}})
	p := execstore.PartitionOf("x", 4)
	h.cmds.reset()
	now := time.Unix(2000, 0)
	for _, bad := range [][]int{{-1}, {4}, {0, 1, 9}} {
		_, err := h.store.PendingOutboxIn(bg, bad, 0)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%v", bad)
		_, err = h.store.PendingSpawnsIn(bg, bad, 0)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%v", bad)
		_, err = h.store.DueTimersIn(bg, bad, now, 0)
		assert.ErrorIs(t, err, execstore.ErrInvalid, "%v", bad)
	}
	_, err := h.store.PendingOutboxIn(bg, []int{p}, -1)
	assert.ErrorIs(t, err, execstore.ErrInvalid)
	for _, empty := range [][]int{nil, {}} {
		o, err := h.store.PendingOutboxIn(bg, empty, 0)
		assert.NoError(t, err)
		assert.Nil(t, o)
		s, err := h.store.PendingSpawnsIn(bg, empty, 0)
		assert.NoError(t, err)
		assert.Nil(t, s)
		d, err := h.store.DueTimersIn(bg, empty, now, 0)
		assert.NoError(t, err)
		assert.Nil(t, d)
	}
	assert.Empty(t, h.cmds.snapshot(), "a refused or empty scan reached the server")

	twice, err := h.store.PendingOutboxIn(bg, []int{p, p}, 0)
	require.NoError(t, err)
	require.Len(t, twice, 1)
	assert.Equal(t, "x", twice[0].SourceID)
}

// mustCommit commits c on exe through s.
func mustCommit(t testing.TB, s *aio.Store, exe *execstore.Execution, c execstore.Commit) {
	t.Helper()
	_, err := s.Commit(bg, exe, c)
	require.NoError(t, err)
}

// The partitioned scans of the shared suite with 3 partitions, so that each holds several
// executions. (The whole suite, with the default partitions, runs in the root package.)
func TestPartitionedScansConform(t *testing.T) {
	storetest.RunPartitioned(t, func(t *testing.T) execstore.Partitioned {
		return newHarness(t, aio.Options{Partitions: 3}).store
	})
}

// The find a partitioned scan sends is ops' scan: its filter, sort and hint, as they are.
func TestPartitionedScanSendsTheScan(t *testing.T) {
	h := newHarness(t, aio.Options{Partitions: 4})
	now := time.Unix(2000, 0)
	for _, c := range []struct {
		scan ops.Scan
		run  func() error
	}{
		{ops.PendingOutboxScan([]int{0, 2}), func() error { _, err := h.store.PendingOutboxIn(bg, []int{2, 0}, 0); return err }},
		{ops.PendingSpawnsScan([]int{1}), func() error { _, err := h.store.PendingSpawnsIn(bg, []int{1}, 0); return err }},
		{ops.DueScan([]int{3}, now), func() error { _, err := h.store.DueTimersIn(bg, []int{3}, now, 0); return err }},
		{ops.DueScan([]int{0, 1, 2, 3}, now), func() error { _, err := h.store.DueTimers(bg, now, 0); return err }},
	} {
		h.cmds.reset()
		require.NoError(t, c.run())
		sent := h.cmds.command("find")
		require.NotNil(t, sent, c.scan.Hint)
		assert.Equal(t, marshal(t, c.scan.Filter), sent.Lookup("filter").Document(), c.scan.Hint)
		assert.Equal(t, c.scan.Hint, sent.Lookup("hint").StringValue())
		if c.scan.Sort != nil {
			assert.Equal(t, marshal(t, c.scan.Sort), sent.Lookup("sort").Document(), c.scan.Hint)
		} else {
			assert.Zero(t, sent.Lookup("sort").Type, c.scan.Hint)
		}
	}
}

func marshal(t testing.TB, d bson.D) bson.Raw {
	t.Helper()
	b, err := bson.Marshal(d)
	require.NoError(t, err)
	return b
}
