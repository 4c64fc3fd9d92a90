package ops

import (
	"go.mongodb.org/mongo-driver/v2/bson"
)

// IndexSpec is one index of ExecutionsCollection as createIndexes takes it: its key, name
// and options, and the forms a server that refuses an option builds instead.
type IndexSpec struct {
	Name string
	Key  bson.D
	// Partial is the index's partialFilterExpression, nil for none: only the documents it
	// matches have entries. Every query hinted to the index implies it, so a server that
	// builds the index whole (it refuses partial indexes) answers the same.
	Partial bson.D
	// CompositeTerms asks for one index term per document for the whole key instead of one
	// per key field (DocumentDB's enableCompositeTerm). A server without the option builds
	// the same index without it.
	CompositeTerms bool
}

// Forms returns the createIndexes index documents to try in turn, best first: with every
// option; without the composite terms; without the partial filter either. A server refuses
// an option it lacks with an error and builds nothing, and the next form is tried.
func (s IndexSpec) Forms() []bson.D {
	base := bson.D{{Key: "key", Value: s.Key}, {Key: "name", Value: s.Name}}
	var forms []bson.D
	partial := bson.E{Key: "partialFilterExpression", Value: s.Partial}
	if s.CompositeTerms {
		f := append(bson.D{}, base...)
		if s.Partial != nil {
			f = append(f, partial)
		}
		forms = append(forms, append(f, bson.E{Key: "enableCompositeTerm", Value: true}))
	}
	if s.Partial != nil {
		forms = append(forms, append(append(bson.D{}, base...), partial))
	}
	return append(forms, base)
}

// The index names of ExecutionsCollection this version creates (see Indexes).
const (
	IndexPendingOutbox = "pending_outbox_by_partition"
	IndexPendingSpawns = "pending_spawns_by_partition"
	IndexPendingTimers = "pending_timers_by_partition"
	IndexDead          = "dead_by_partition"
	IndexByDefinition  = "by_definition"
	IndexByStatus      = "by_status"
)

// Indexes returns the indexes of ExecutionsCollection, so that every scan and listing costs in
// proportion to what it returns, and every write as little as they allow. On a server that
// keeps one row per document and indexes every version it writes (DocumentDB), each
// secondary index costs each write entries, whether or not the indexed fields changed; on
// MongoDB only an index whose keys changed costs a write anything.
//
//   - IndexPendingOutbox, IndexPendingSpawns: {partition, outbox_n} and {partition, spawns_n},
//     partial on a count above 0, so only the documents with pending entries are in them: the
//     relays' scans (PendingOutboxScan, PendingSpawnsScan).
//   - IndexPendingTimers: {partition, timer_min}, partial on timer_min being present, so only
//     the documents with timers are in it: the sweep's scan (DueScan).
//   - IndexDead: {partition, dead_n}, partial on a count above 0: only the documents that
//     hold dead items, for the listing of dead items and the backlog's count of them.
//   - IndexFinished: {partition, finished_at}, partial on finished_at being present, so only
//     the documents that were ever finished are in it: the retention's scan (ExpiredScan).
//   - IndexByDefinition, IndexByStatus: {definition_id, _id} and {status, _id}, every document
//     in them: a listing by definition or status walks one in _id order.
//
// Each asks for composite terms where the server has them. A listing of roots only walks the
// _id index and skips children: no index of parent_id is kept, which every write would pay
// for on DocumentDB to serve that one listing. Nor is one of FieldCreatedAt or
// FieldUpdatedAt: DocumentDB sorts a listing by either without using such an index (measured
// in docs/performance.md), and updated_at changes at every commit, so every commit would
// write to it on any server. Create each with one createIndexes: FerretDB
// 1.24.2 drops the connection on a createIndexes that names several indexes some of which
// exist.
func Indexes() []IndexSpec {
	gt0 := func(field string) bson.D { return bson.D{{Key: field, Value: bson.D{{Key: "$gt", Value: 0}}}} }
	return []IndexSpec{
		{Name: IndexPendingOutbox, Key: bson.D{{Key: FieldPartition, Value: 1}, {Key: fOutboxN, Value: 1}},
			Partial: gt0(fOutboxN), CompositeTerms: true},
		{Name: IndexPendingSpawns, Key: bson.D{{Key: FieldPartition, Value: 1}, {Key: fSpawnsN, Value: 1}},
			Partial: gt0(fSpawnsN), CompositeTerms: true},
		{Name: IndexPendingTimers, Key: bson.D{{Key: FieldPartition, Value: 1}, {Key: FieldTimerMin, Value: 1}},
			Partial: bson.D{{Key: FieldTimerMin, Value: bson.D{{Key: "$exists", Value: true}}}}, CompositeTerms: true},
		{Name: IndexDead, Key: bson.D{{Key: FieldPartition, Value: 1}, {Key: fDeadN, Value: 1}},
			Partial: gt0(fDeadN), CompositeTerms: true},
		{Name: IndexFinished, Key: bson.D{{Key: FieldPartition, Value: 1}, {Key: FieldFinishedAt, Value: 1}},
			Partial: bson.D{{Key: FieldFinishedAt, Value: bson.D{{Key: "$exists", Value: true}}}}, CompositeTerms: true},
		{Name: IndexByDefinition, Key: bson.D{{Key: FieldDefinitionID, Value: 1}, {Key: fID, Value: 1}}, CompositeTerms: true},
		{Name: IndexByStatus, Key: bson.D{{Key: FieldStatus, Value: 1}, {Key: fID, Value: 1}}, CompositeTerms: true},
	}
}

// ObsoleteIndexes returns the names of the indexes earlier versions of the module created on
// ExecutionsCollection and this one does not: the scans without partitions' ("outbox_pending",
// "spawns_pending", "timers_due"), and the whole indexes that Indexes replaced. Drop them
// where present, once Indexes exist: every secondary index costs every write, on some servers
// an entry per write whatever changed. A process of an earlier version hints its scans to the
// indexes it created, and on a server that refuses a hint to a missing index (MongoDB,
// DocumentDB) its scans fail once they are dropped: upgrade every process of a database
// together.
func ObsoleteIndexes() []string {
	return []string{"outbox_pending", "spawns_pending", "timers_due",
		"outbox_by_partition", "spawns_by_partition", "timers_by_partition", "list_definition", "list_status", "list_parent"}
}
