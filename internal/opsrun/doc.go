// Package opsrun runs the commands package ops builds against the store's collections, and
// tells what each one did: a commit alone or a group commit's bulk write and its settlement,
// the idempotent writes (acks, timer deletes) in bulk, the seq reservations, the index
// creation, and every read (loads with the dedupe verdict, listing, pending outbox and spawns,
// due timers, traces).
//
// Guarantees every operation here keeps:
//   - A commit that did not win is explained by one read of what the primary has now
//     (Env.Primary): already processed, a version conflict, or a moved trace index; nothing
//     was written.
//   - A write whose result did not come back is reported as *execstore.OutcomeUnknownError,
//     never as a plain failure; a definite server refusal is reported as such. A group commit
//     settles each plan from the server's answer and one read-back, and reports a win seen
//     without an answer only once a majority read confirms it.
//   - Every bulk write lists its statements in one global order, by _id and then by what
//     makes the order total (order.go), so that no two bulks can deadlock on an engine that
//     takes row locks in statement order.
//   - On the FerretDB profile, idempotent writes of one kind merge into updateMany
//     statements, each document once a statement, under an $or of their own guards
//     (merged.go): each document changes as its own write would have changed it.
//   - Reads project only what they return; the snapshot is never read by a relay or a sweep,
//     and on MongoDB the dedupe set is never shipped to the client (FerretDB has no aggregation
//     $in, so there the membership test runs in the client, on the one document read).
//
// Where FerretDB lacks a MongoDB feature, the operation picks a formulation by
// ops.Layout.Profile.
package opsrun
