// Package memstore is an execstore.Store kept in process memory. It is for the unit tests of
// the people who write engines on top of execstore. A handler can be run thousands of times
// against the same contract as the MongoDB store (package aio), without a server. It is not a
// stand-in for MongoDB in this module's own tests, which run against a server.
//
// What holds, as it does for the MongoDB store:
//   - Commit is atomic and guarded by the caller's version. The snapshot at version+1, the
//     outbox entries, the dedupe mark, the timer ops (the last op on a path wins), the spawn
//     intents and the trace step become visible together or not at all. A stale version gets
//     a *execstore.ConflictError (Found is execstore.NoVersion when there is no execution).
//     Nothing is then written, and the caller's Execution is left untouched. Of racing
//     creators at version 0 exactly one wins.
//   - A commit whose ProcessedEventID is already in the dedupe set gets an
//     *execstore.AlreadyProcessedError, whose Version is the stored version. That is checked
//     under the same lock as the version, and before it. So an event in the set is refused
//     even when the version is stale too, and on the create path. Nothing is written, and
//     the caller's Execution is left untouched.
//   - Outbox and spawn seqs come from one counter each, unique and increasing.
//     PendingOutbox and PendingSpawns return the oldest seq first, so each source's entries
//     come in commit order. Acks remove exactly that entry and are idempotent.
//   - The store is execstore.Partitioned, into Options.Partitions partitions. A scan of some
//     partitions returns the whole scan restricted to their executions, in the same order.
//   - The store is an execstore.DeadLetters. Fail, ListDead, CountDead and Revive each run
//     under the store-wide lock, so a commit or an ack never lands in the middle of one. Fail
//     changes only an item still pending (a timer still at the fire time named), and with
//     Failure.Dead, or once its attempts reach Failure.MaxAttempts (counted under that
//     lock, so concurrent calls never record more), moves it, with what it held, from
//     pending to dead at once. A commit never drops a dead item. A timer armed or cancelled
//     anew starts with no attempts. Revive puts an entry back under its seq, so in its
//     source's order, and refuses a timer whose path is armed again (execstore.ErrConflict).
//     Fail leaves the version alone; Revive moves it on by one under the same lock, so a
//     relay that knew the version scans and the revived item keeps its place.
//   - Each timer's arming is named by the version of the commit that armed it
//     (execstore.DueTimer.Version). DeleteTimers removes a timer only while it is still that
//     arming, so a re-arm of its path to the same fire time survives the delete of the
//     timer before it.
//   - The dedupe set, with Options.DedupeWindow, keeps exactly the event ids the MongoDB
//     store keeps with the same window. The trace keeps the last Options.TraceMax steps,
//     stamped with a per-execution index that only grows.
//   - Spawn contexts and trace steps come back as the MongoDB store returns them. They are
//     encoded as BSON when written and decoded when read: nested documents as
//     map[string]any, arrays as []any, integers as the int32 or int64 BSON holds.
//   - Every input the MongoDB store refuses with execstore.ErrInvalid is refused here with the
//     same error, checked in the same order, before anything else.
//   - A call whose context has ended returns the context's error and does nothing. After
//     Close every call returns execstore.ErrClosed. Every method is safe for concurrent use.
//   - The store never keeps or hands out a caller's slice or map. Snapshots, events, contexts
//     and trace steps are copied on the way in and on the way out.
//
// What it does not do: it keeps nothing beyond the process (no persistence, no sharing between
// processes). An outcome is never unknown (no execstore.ErrOutcomeUnknown). A commit whose
// write the MongoDB store would refuse as past the 16 MiB document limit is refused here too,
// with ErrInvalid, measured as the MongoDB store measures it. A commit that is small itself
// but grows a stored document past the limit is accepted here, though MongoDB refuses it.
//
// Costs: every call takes one store-wide lock (a read lock for reads) and does its work in
// memory. Commit costs the copy of what it writes, plus the BSON encoding of its spawn
// contexts and trace step. DueTimers scans every timer of the store. PendingOutbox and
// PendingSpawns cost what they return. An ack costs a binary search and the shift of the
// later entries. List costs the executions it steps over. Fail costs a binary search (an
// entry) or a map look-up (a timer); ListDead sorts every dead item of the store.
//
// Leases (NewLeases) is a lease store in process memory: a relay's Options.Lease in tests,
// and in simulations run in virtual time. Its ClaimAs, Complete, RenewAll, Release and List
// are *idem.Store's (storetest.RunLeases checks both), by the clock LeasesOptions.Clock
// (default time.Now, which is the bubble's clock inside a testing/synctest bubble). What
// holds:
//   - Every call holds the Leases' one lock from its first read of a record to its last
//     write, so no other call's write lands in between. Of concurrent claims of one key
//     exactly one finds it free and takes it (New, or LeaseReclaimed from a lapsed claim);
//     the others find that claim. Complete, RenewAll and Release act only on a record still
//     claimed with the token given, as the lock shows it, so a claim taken over is fenced.
//   - Expiry is decided when a call reads a record, by the clock: a lease or a retention
//     ends at its Until. No goroutine runs. A completed record past its retention reads as
//     absent, and is deleted as the store grows; a lapsed claim stays, listed with Lapsed
//     set, until a claim takes it or its token releases it.
//   - Input an idem.Store refuses is refused with the same execstore.ErrInvalid, by idem's
//     own checks, before anything else. Then a call whose context has ended returns its
//     error, and after Close every call returns execstore.ErrClosed.
//
// Unlike an idem.Store, Leases keeps nothing beyond the process, never returns an unknown
// outcome, and reaps no lapsed claim. Each call costs a map look-up per key; a claim of a
// new key, or a release, the shift of the sorted keys, and the claim that finds the store
// doubled since the last sweep a pass over every record; List a binary search and the
// records it steps over.
package memstore
