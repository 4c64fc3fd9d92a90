// Package ops is the document model of the store and the exact MongoDB commands each of its
// operations issues, as pure builders. It is what a caller needs to read the stored
// documents, to index them, or to issue a commit's write inside a multi-document transaction
// of its own, together with its business documents (see the example). Nothing here sends a
// command. Package aio runs these builders' output, and every builder is unit-tested without
// a server.
//
// The model: every execution is one document of ExecutionsCollection, its fields named by the
// Field… constants. Its outbox entries, spawn intents and trace steps are stored as
// OutboxDoc, SpawnDoc and TraceDoc, and its timers are keyed by EncodeKey(path). Layout says
// what else shapes the documents (the profile, the trace bound, the dedupe window). Every
// store on a database must use the same Layout. Seqs come from the counters of
// CountersCollection (ReserveCommand). Indexes lists the indexes the scans rely on.
//
// Guarantees every command here keeps:
//   - A commit is one single-document write, atomic on a standalone server, with no
//     transaction. It is an update guarded by the loaded version and, when it records an
//     event, by that event's absence from the dedupe set. A version-0 create is an insert.
//     When the guard misses, nothing was written.
//   - Uniqueness never rests on an upsert whose filter is the _id alone. An engine that runs
//     such an upsert as INSERT … ON CONFLICT DO UPDATE may tell several racers they won. So
//     a version-0 commit is an insert, and a seq block is a findAndModify $inc of the
//     counter's existing document, the counter being created by an insert when it is missing
//     (see ReserveCommand). On MongoDB and on a row-locking engine alike, the _id index picks
//     one inserter, and a single-document update of an existing document is atomic.
//   - A commit stamps the document with its time (Seqs.At): FieldUpdatedAt always,
//     FieldCreatedAt too when it creates the execution, and its trace step's At. They are
//     plain $sets of the commit's one guarded update (or fields of its insert), so the
//     stored times are always exactly the winning commit's: a commit that lost the version
//     guard wrote none of them.
//   - Acks and timer deletes are guarded so that repeating one is harmless: once applied, it
//     matches nothing.
//   - Keys built from caller text (timer paths) go through EncodeKey, which round-trips every
//     string, so no input can address another field.
//   - A commit that cannot fit in a document is refused with execstore.ErrInvalid when it is
//     built (PrepareCommit), before any seq is taken or any command sent.
//
// Where FerretDB lacks a MongoDB feature, the builder picks a formulation by Layout.Profile:
// the MongoDB-native one on MongoDB, a correct equivalent on FerretDB. For example FerretDB
// ignores $slice, so the trace ring is a sub-document there.
package ops
