// Package ops holds the document model of the store and, one operation per file, the exact
// MongoDB commands each operation issues: pure builders (unit-tested without a server) and the
// code that runs them against a collection.
//
// Guarantees every operation here keeps:
//   - A commit is one single-document write (an update guarded by the loaded version and, when
//     it records an event, by that event's absence from the dedupe set; or an insert for a
//     version-0 create): atomic on a standalone server, no transaction. When the guard misses,
//     one read tells which part of it did.
//   - Reads project only what they return; the snapshot is never read by a relay or a sweep,
//     and on MongoDB the dedupe set is never shipped to the client (FerretDB has no aggregation
//     $in, so there the membership test runs in the client, on the one document read).
//   - Uniqueness never rests on an upsert whose filter is the _id alone, which an engine that
//     runs it as INSERT … ON CONFLICT DO UPDATE executes with several winners: a version-0
//     commit is an insert; a seq block is a findAndModify $inc of the counter's existing
//     document, the counter created by an insert when it is missing (counters.go). On MongoDB
//     and on a row-locking engine alike, the _id index picks one inserter and a
//     single-document update of an existing document is atomic.
//   - Every bulk write lists its statements in one global order, by _id and then by what
//     makes the order total (order.go), so that no two bulks can deadlock on an engine that
//     takes row locks in statement order.
//   - Keys built from caller text (timer paths) go through encodeKey, which round-trips every
//     string, so no input can address another field.
//   - A write whose result did not come back is reported as *execstore.OutcomeUnknownError,
//     never as a plain failure; a definite server refusal is reported as such.
//
// Where FerretDB lacks a MongoDB feature, the operation picks a formulation by Profile: the
// MongoDB-native one on MongoDB, a correct equivalent on FerretDB.
package ops
