// Package idem is an asynchronous MongoDB store of idempotency keys. It is for APIs and
// workflow engines that must run a request once however often it is retried. The first
// caller of a key claims it under a lease, runs the request and stores its response. Every
// later caller with the same key gets that response replayed. A request whose runner dies
// (or stalls past its lease) before storing its response is run again by the next caller
// once the lease lapsed: at most once at a time, not at most once. Do does this for Go functions,
// and Middleware for net/http (following draft-ietf-httpapi-idempotency-key-header-07).
//
// There is one record per key (_id), with an expiry for reaping. A CLAIMED record holds the
// request's fingerprint, a random 128-bit claim token, the claim time and the lease end. A
// COMPLETED one also holds the response (status, headers, body) and the end of its retention.
//
// What always holds:
//   - Of any number of concurrent claims of one key, at most one gets a token (New or
//     LeaseReclaimed). Complete, Renew and Release act only with the current token. So a
//     claim taken over (its lease lapsed) is fenced: it can no longer store a response.
//   - That "at most one" holds on servers that run writes concurrently too (FerretDB 2.x on
//     DocumentDB, which locks rows). No claim is an upsert whose filter is the _id alone.
//     The $$NOW claim's upsert carries a predicate that matches every record. So exactly one
//     racer inserts, and the others are refused as duplicates and claim the record that now
//     exists. The FerretDB formulation inserts a record that is absent. It replaces one it
//     read only under a guard on what it read (_id, state, token, lease end). When another
//     claim's write lands between the read and the replace, the guard no longer matches. A
//     row-locking engine waits for the other write's lock, then evaluates the filter against
//     the row as that write left it (PostgreSQL's read-committed rule, which DocumentDB
//     updates follow). MongoDB evaluates it against the document as it stands. So of
//     concurrent replaces one matches, and of concurrent inserts one is stored. A
//     duplicate-key refusal is MongoDB's 11000 or a row-locking engine's unique violation
//     (code 1).
//   - A record's Holder (ClaimAs) is written by the same write as its token, and replaced
//     by every claim that takes the record: it names the claimer of the token the record
//     holds, on either formulation, whatever write ran in between. It proves nothing; the
//     token does.
//   - Expiry is decided by the server's clock, never the application's. The MongoDB
//     formulation reads $$NOW inside the write. The FerretDB formulation estimates the
//     server's clock within ε (half a round trip plus 1ms) from a reading of it. It takes
//     only elapsed time from the application (on Go's monotonic clock). The reading is $$NOW
//     in an aggregate where the server serves it (server.NowInReads), else hello's localTime.
//     $$NOW comes first because it is the clock of the engine that stores the records. On
//     DocumentDB it is PostgreSQL's transaction start time, the same for every gateway in
//     front of the database. Hello's localTime is the clock of whichever gateway answered.
//     $$NOW is also the clock the MongoDB formulation's writes read. A lease is never taken
//     over before its full length has passed on that clock, and at most
//     2ε_writer+2ε_reader after.
//   - Expiry is enforced when a record is read. Reaping only bounds the collection's size: a
//     TTL index with the MongoDB formulation, a bounded sweep with the FerretDB one (which
//     Close stops).
//   - An unreadable record (missing or mistyped fields) reads as absent. A claim takes it
//     over and says so (Claim.RecoveredFromCorrupt), one claimer of many.
//   - A request whose fingerprint differs from the stored one (same fingerprint version) is
//     refused with a *FingerprintMismatchError, never given the stored response.
//   - A write sent but not answered is an *execstore.OutcomeUnknownError (matching
//     execstore.ErrOutcomeUnknown), unless a read settles it exactly. A claim whose token
//     (chosen before sending) is read back is the caller's (Claim.Settled). A complete is
//     settled when the record shows it done, or fenced.
//   - RenewAll and List change nothing that Renew and Get do not. RenewAll is one write
//     that matches each claim's record only while it is claimed with that claim's token:
//     with MongoDB's formulation a bulk write of the guarded updates Renew sends, one per
//     claim, in key order, so two holders' bulk renewals on a row-locking engine never wait
//     on each other in a cycle; with the FerretDB formulation one updateMany per 96 claims
//     whose filter is the same guards joined by $or, under an _id $in that a row-locking
//     engine serves from its _id index. Each record is matched and updated alone,
//     atomically, as by Renew. On a row-locking engine two holders' renewals lock only
//     records that carry their own tokens, so one waits for the other only on a record
//     taken over from it meanwhile; a cycle would need two such take-overs in opposite
//     directions at once, and the engine would end it by failing one write, an error the
//     holder retries. A claim taken over in between makes it match nothing, and RenewAll
//     reports it false.
//     When the write matches fewer claims than it holds, one read of their records (by _id)
//     tells which: a claim is true when its record is still claimed with its token. That is
//     right whatever another process writes between the write and the read. A record matches
//     a token's guard over one unbroken span, from the claim that wrote the token until a
//     complete, release or take-over: tokens are random and never written again. The caller
//     holds the token, so the span began before the write. A record the read finds claimed
//     with the token was so when the write ran, so the write renewed it. A record the read
//     finds otherwise is no longer held, and false says so, even when the write renewed it
//     just before another holder reclaimed it. On a row-locking engine the read starts after
//     the write's reply, so after every record it updated committed, and reads the last committed
//     version of each row without waiting on a lock. MongoDB's read at the primary sees
//     every write acknowledged before it.
//     List is one read: it decides nothing, and a claim decides again.
//   - Nothing a request sends reaches another user's record. Do and Middleware store a key k
//     as ClientKey(k), ClientPrefix+k, whatever k spells; the relays' leases (relay.Options.
//     LeaseKey, "execstore/relay/outbox" and "execstore/relay/timers" by default, then
//     /members/<name>, /partitions/<p>, /partitioning) are never under ClientPrefix, as
//     package relay refuses a LeaseKey there. So one Store may serve requests and hold the
//     relays' leases. Every write Do and Middleware send has a filter on one _id under
//     ClientPrefix; every write a relay sends has one on its own keys (RenewAll's: each
//     claim's _id, or an _id $in of them). So no interleaving of the two makes either match,
//     insert, lock or read the other's record: MongoDB matches a write's documents by _id,
//     a row-locking engine locks the rows of those _id alone, and a duplicate-key refusal is
//     over one _id. A record's _id never changes after its insert. A relay's List reads a
//     range of _id under its LeaseKey, which holds no ClientKey. The sweep deletes a record
//     only past its own expiry, and no lease waits on it. The store's pool and server are
//     shared, though: a flood of requests queues ahead of the relays' renewals, so give the
//     relays a Store of their own where requests may come in bulk. Keys a program passes to
//     Claim and the rest are its own: they must not start with ClientPrefix unless they are
//     ClientKey of a request's key. Records Do and Middleware stored before ClientPrefix was
//     added (under the bare key) are not found by them.
//   - Bad input (empty or oversized keys, non-positive leases, oversized bodies) is refused
//     with execstore.ErrInvalid before any I/O.
//
// As in package aio, every operation is a request on a bounded pool (package pool). A call
// whose context ends while it is queued is withdrawn unsent. Close stops new calls, drains
// the rest within its context, and leaves no goroutine behind.
//
// The formulation is picked at Open by what the server does, not by its name. Open probes
// whether the server serves $$NOW in update pipelines (server.NowInWrites), with a
// findAndModify and an update that match no document. Where it does, a claim is one
// findAndModify whose pipeline decides by $$NOW (server.MongoDB). That is MongoDB 4.4 and
// newer, and DocumentDB with documentdb.enableVariablesSupportForWriteCommands on. Where it
// does not, a claim is a read and a guarded write (server.FerretDB). That is FerretDB 1.x,
// and FerretDB 2.x on DocumentDB by default. Store.Server reports the profile and the
// probes. Options.Profile forces a formulation.
package idem
