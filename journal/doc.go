// Package journal is an operation journal on MongoDB. It is the durable record of one
// invocation of an outside-world operation (a tool call, a payment), so that a crashed or
// fenced worker never runs it twice by guessing. An invocation is claimed by its first
// owner, and advanced by owner/revision compare-and-set. It is checkpointed, and prepared
// with an opaque operation that names the exact checkpoint it continues from. The operation
// is handed out per attempt (Dispatch), and each attempt is reconciled by a receipt from the
// outside system.
//
// There is one document per invocation, with its id as _id. It holds the identity (scope,
// request digest), the owner, a random claim id, the revision, the checkpoint, the prepared
// operation, the attempt count and state, a no-replay flag, the receipts and the time of the
// latest. Checkpoints, the operation and receipts are stored only as ciphertexts of the
// caller's Cipher. KeyRing is the standard Cipher: AES-256-GCM with rotation.
//
// An invocation is finished (Invocation.Finished) when no call can record another attempt or
// receipt for it: its latest attempt Succeeded, or ended Failed after an attempt ended
// Unknown (no replay). Failed alone is not finished, however long ago: another attempt may
// follow. Unknown is not finished until a receipt settles it. The retention
// (DeleteExpired, Options.Retention) deletes finished invocations past a cutoff, counted
// from the receipt that finished them. It is off unless asked for.
//
// What always holds:
//   - Identity: an id is bound to its scope and digest for good. HasInvocation and Claim
//     refuse the same id with another one (*BindingError), and never report it absent.
//   - First owner: of any number of concurrent claims exactly one wins (revision 1). The
//     same owner claiming again gets its fence back. Another owner is refused. The claim is
//     an insert with the invocation id as _id, never an upsert. So the _id index picks the
//     one winner on every server, those that run writes concurrently and lock rows included.
//     A duplicate-key refusal is MongoDB's 11000 or such an engine's unique violation
//     (code 1). Every other write of an invocation updates an existing document, one at a
//     time: the journal sends no bulk write. The retention's delete is the one write of
//     several documents (below).
//   - Fencing: every mutation of an invocation names a Fence (owner, claim, revision) and
//     is one write guarded by it. The retention's delete is guarded by the claim and
//     revision it read instead (below). A stale or foreign fence writes nothing and gets an
//     *OwnerConflictError with expected and found, which differ. A guarded write that
//     matches nothing, although the fence and the stored state allow it, met a document
//     changed outside the journal: that is an *IntegrityError, never a conflict.
//     VerifyOwner is a majority read only.
//   - Sealed and bound: every ciphertext's associated data binds it to the invocation's
//     identity, its claim, and its place. The place is a checkpoint's phase and id, the
//     checkpoint an operation continues from, or a receipt's attempt and outcome. A
//     ciphertext altered, or copied to another invocation, claim or phase, is refused on read
//     (*IntegrityError), never returned. Nothing of a checkpoint, operation or receipt is
//     stored in plaintext. The attempt flags (attempts, latest, no-replay) are plaintext for
//     the writes' filters. They are checked on every read against the authenticated
//     receipts, and flags they contradict are an *IntegrityError too.
//   - Prepare names the checkpoint: the checkpoint id is in the write's filter. Another
//     stored checkpoint means nothing is written (*CheckpointMismatchError).
//   - No replay after UNKNOWN: Dispatch hands the body out only after recording the attempt,
//     and only when the latest attempt Failed (or there is none). It never does once any
//     attempt was reconciled Unknown (ErrNoReplay, also checked against the authenticated
//     receipts). The only way forward is then Reconcile with the outside system's receipt.
//     Dispatch decides from a majority read, everything authenticated, before it writes: a
//     refused Dispatch records no attempt. The write is one update guarded by the fence and
//     by the attempt count, latest state, no-replay flag and operation ciphertext it read.
//     So a write of another process that lands between the read and the update (on MongoDB
//     or on an engine that locks rows) makes it match nothing. Of two racing Dispatches, one
//     records the attempt, and the other is refused from a fresh read.
//   - Durability: writes are {w: "majority", j: true}, bounded by Options.WriteTimeout as a
//     context deadline (driver v2 sends no wtimeout). Reads are at majority read concern,
//     from the primary. The client Open makes never retries writes. Open refuses retryable
//     writes, and a cipher that cannot seal and open a probe (nil, a KeyRing without keys).
//     Unless Options.AcceptWeakDurability is set, it also refuses a deployment where
//     "majority" may be one node, decided from hello alone. That is a standalone server, or
//     a replica set whose hosts (its voting, data-bearing members) are fewer than two.
//     Arbiters hold no data, a passive member may not vote, and hidden members are not
//     listed. A mongos is accepted: its shards are not visible to this rule.
//   - Fail closed: a write sent but not answered (network cut, timeout, write-concern error)
//     is an *execstore.OutcomeUnknownError. It makes the Journal refuse every mutation
//     (ErrUncertain) until Reverify has read the invocation with a majority read. So does a
//     read that fails once sent, when its answer decides the caller's next step. Those reads
//     are VerifyOwner's, Reverify's own, and the read that says why a guarded write matched
//     nothing (in Checkpoint, Prepare, Dispatch and Reconcile, where nothing was written but
//     the caller does not learn why). Each is then an *execstore.OutcomeUnknownError for
//     that call. Reads whose failure leaves the caller nothing to act on return the read's
//     error and change nothing. Those are Read, HasInvocation, Claim's read after its insert
//     was refused as a duplicate (no fence is handed out), and Dispatch's read before its
//     write (nothing was sent). A call refused before it is sent (its context ended while
//     queued, the journal closed) changes nothing either. The retention's delete and count
//     are the exceptions (below).
//   - Finish times are the server's: Reconcile's own write records its receipt's time with
//     $currentDate, a plain update operator that MongoDB, FerretDB 1.x and DocumentDB all
//     take (unlike $$NOW, which needs an update pipeline). Dispatch's write clears it. So an
//     invocation's finish time is written by the very write that finishes it. The
//     retention's cutoff is its caller's clock: a caller ahead of the server by s deletes
//     s early. The plaintext flags and time are not authenticated: one who can alter them
//     can delete the document anyway.
//   - Retention deletes only what it read: DeleteExpired reads finished invocations past the
//     cutoff (on IndexFinished), then sends one deleteMany whose filter names each with the
//     claim and revision read, and the finished condition with the cutoff. Every write of
//     the journal moves the revision, and a claim anew has another claim id. So an
//     invocation written between the read and the delete (an owner's checkpoint), claimed
//     anew, or altered outside the journal is kept. On MongoDB, the delete matches each
//     document against its filter as the document is when it is deleted (a document
//     changed while the delete yields is matched again). On an engine that locks rows, the
//     delete waits for a concurrent write's row lock, then evaluates its filter against
//     the row as that write left it. Either way a write that lands first makes the delete
//     miss, and a write that comes after finds nothing: its fence matches no document, and
//     the read that says why finds none (execstore.ErrNotFound). The deletions are counted
//     with $inc in one document of the journal's database (RetentionTotals): only what a
//     delete reported deleted, so the totals never exceed the deletions.
//   - A deleted id is forgotten: Claim inserts it anew, and the operation can run again.
//     That is why the retention is off by default, and why it deletes finished invocations
//     only.
//   - The retention's delete whose outcome is unknown does not make the journal uncertain.
//     The fail-closed rule guards what the journal decides from its own write: a fence it
//     hands out, an attempt it records before the body. A delete hands out nothing.
//     Whether it landed or not, each later call decides from the server alone: Claim by its
//     insert on the _id index, every mutation by a filter with the claim and revision
//     (which a deleted document cannot match), Read and Reverify by a majority read. No
//     fence can come from a guess about the delete. Nor does its count's: the totals then
//     fall short. While the journal is uncertain, the retention refuses to run
//     (ErrUncertain), as every mutation does.
//   - Bad input (empty ids, payloads past MaxPayloadBytes, unknown phases or outcomes, a
//     fence the journal did not make, a zero cutoff, a limit outside 1 to
//     MaxRetentionBatch) is execstore.ErrInvalid before any I/O.
//
// As in the module's other stores, every operation is a request on a bounded pool (package
// pool). A call whose context ends while queued is withdrawn unsent. Close stops the
// retention's goroutine (Options.Retention) and waits for it, drains the rest within its
// context and disconnects the client.
//
// FerretDB makes concurrent writes to one document atomic only behind the module's
// write-serializing front (package embedded). The journal's guarantees assume MongoDB's
// single-document atomicity.
package journal
