// Package ops is the document model of the store and the exact MongoDB commands each of its
// operations issues, as pure builders: what a caller needs to read the stored documents,
// index them, or issue a commit's write inside a multi-document transaction of its own,
// together with its business documents (see the example). Nothing here sends a command; the
// store runs these builders' output (package aio, through an internal package), and every
// builder is unit-tested without a server.
//
// The model: every execution is one document of ExecutionsCollection, its fields named by the
// Field… constants, its outbox entries, spawn intents and trace steps stored as OutboxDoc,
// SpawnDoc and TraceDoc, its timers keyed by EncodeKey(path); Layout says what else shapes
// the documents (the profile, the trace bound, the dedupe window), and every store on a
// database must use the same one. Seqs come from the counters of CountersCollection
// (ReserveCommand). Indexes lists the indexes the scans rely on.
//
// Guarantees every command here keeps:
//   - A commit is one single-document write (an update guarded by the loaded version and, when
//     it records an event, by that event's absence from the dedupe set; or an insert for a
//     version-0 create): atomic on a standalone server, no transaction needed. When the guard
//     misses, nothing was written.
//   - Uniqueness never rests on an upsert whose filter is the _id alone, which an engine that
//     runs it as INSERT … ON CONFLICT DO UPDATE executes with several winners: a version-0
//     commit is an insert; a seq block is a findAndModify $inc of the counter's existing
//     document, the counter created by an insert when it is missing (counters.go). On MongoDB
//     and on a row-locking engine alike, the _id index picks one inserter and a
//     single-document update of an existing document is atomic.
//   - Acks and timer deletes are guarded so that repeating one is harmless: once applied, it
//     matches nothing.
//   - Keys built from caller text (timer paths) go through EncodeKey, which round-trips every
//     string, so no input can address another field.
//   - A commit that cannot fit in a document is refused with execstore.ErrInvalid when it is
//     built (PrepareCommit), before any seq is taken or any command sent.
//
// Where FerretDB lacks a MongoDB feature (it ignores $slice, so the trace ring is a
// sub-document there), the builder picks a formulation by Layout.Profile: the MongoDB-native
// one on MongoDB, a correct equivalent on FerretDB.
package ops
