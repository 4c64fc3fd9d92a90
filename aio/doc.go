// Package aio is the asynchronous MongoDB execution store. It implements execstore.Store:
// every call becomes an operation sent on a bounded request channel, served by a bounded pool
// of workers (package pool), which run the commands built in package ops.
//
//	caller ──▶ validate ──▶ request channel ──▶ worker (pool) ──▶ alone: one command ──▶ server
//	   ▲       + prepare     (QueueDepth)         │  takes seqs           │
//	   │                                          │  (batch.Sequence)     │
//	   │                                          └─▶ grouped: builds the command ──▶ coalescer
//	   │                                               (batch.Coalescer intake; the next batch
//	   │                                                gathers while one is in flight)
//	   │                                                          │ flush: one bulk write
//	   └──────────── Future ◀── settled by the worker, or by the flush
//
// Group commit and coalescing: the worker passes some operations to a coalescer. These are a
// commit of an existing execution, an ack and, on MongoDB, a plain load or a LoadForEvent. A
// lone one goes out at once. Those that arrive while four batches are in flight (one write
// batch on FerretDB) go out together, as one bulk write, one find or one aggregation (Options.MaxBatch), once a batch
// returns, or at once on another slot when eight or more wait (Options.MaxBatchesInFlight).
// The caller can still withdraw an operation until the flush sends it.
//
// What always holds:
//   - Bad input is refused with execstore.ErrInvalid in the caller's goroutine, before anything
//     is queued. Nothing is written.
//   - A call whose context ends before its operation was sent to the server returns the
//     context's error, and the operation is guaranteed not to be applied. A write whose context
//     ends after it was sent returns an error matching execstore.ErrOutcomeUnknown that wraps
//     the context's error. Reads return the context's error.
//   - A caller blocks while the request channel is full, for as long as its context allows.
//     With Options.ShedLoad the call returns execstore.ErrOverloaded at once instead.
//   - A commit costs exactly one server command when a seq block is available. The outbox and
//     spawn seqs come from blocks the store reserves ahead of need (package batch). The trace
//     index comes from the execution's stored document.
//   - A commit carrying a ProcessedEventID is guarded on the server by the dedupe set as well
//     as the version, in the same single-document update. An event already processed is
//     refused with execstore.ErrAlreadyProcessed, and nothing is written.
//   - With the snapshot cache on (Options.CacheSize), LoadForEvent of a cached execution is
//     answered in the caller's goroutine with no server command. The answer is never older
//     than this store's own last successful commit or read of the execution. The commit's
//     guards refuse what a stale entry got wrong.
//   - An ack (AckOutbox) waits up to Options.AckWait for the next commit of the entry's
//     source execution through this store. That commit removes the entry in its own
//     single-document update, guarded by the entry being there as well as by the version,
//     and lowers the outbox count by one for it: the entry and its count change together or
//     not at all. If another write removed the entry first (another relay's ack), that guard
//     misses, nothing is written, and the commit is sent again without the ack: the count is
//     never lowered twice. On a row-locking engine the guard is evaluated under the row's
//     lock, against the row the other write left. The ack returns nil only once a write that
//     removed the entry is known to be applied: the commit that won, or the ack's own write.
//     An ack no commit took within AckWait (or before the store went a tenth of AckWait
//     without sending a commit while none waited or was in flight in its group commit), or
//     taken by a commit that lost, was refused or
//     whose outcome is unknown, is written alone, which does nothing if the commit did remove
//     the entry. A call whose context ends while it waits writes nothing. Close writes the
//     waiting acks before it returns.
//   - A DeleteTimers waits the same way, each timer for the next commit of its execution
//     through this store. That commit removes the timer in its own update, guarded by the
//     timer still being stored at its fire time, or, when the commit itself re-arms or
//     cancels the timer's path, by that operation alone: so a timer re-armed in between, by
//     that commit or an earlier one, stands. A guard that misses (another write removed or
//     re-armed it) makes the commit match nothing, and it is sent again without the delete,
//     which is written alone, as is every delete no commit took within AckWait: those of one
//     call as one bulk write.
//   - A commit made with the context a relay.Sweeper of this process gives the handler of a
//     due timer, on that timer's execution, removes the timer in its own single-document
//     update (Stats.TimersCarried), guarded by the timer still being stored at its fire
//     time as well as by the version. A commit that re-arms or cancels the timer's path
//     does not carry it: its own operation is the timer's fate. If another write removed or
//     re-armed the timer first (another sweeper after a hand-over, a commit that cancelled
//     it), the guard misses, nothing is written, and the commit is sent again without the
//     removal; on a row-locking engine the guard is evaluated under the row's lock. At most
//     one commit carries the removal at a time, and none after the handler returned. A
//     commit that carries it stamps a token of its own, so that the sweeper can put the
//     timer back when the handler then fails: that restore is one update guarded by the
//     version and token that commit wrote and the path being empty, so it changes nothing
//     once any other commit reached the execution, nor when the commit was never applied.
//     It moves the version on by one, so that anything computed from a read made before it
//     (a snapshot, a repair of the timer hint) is refused by its version guard.
//   - What hands out something unique has exactly one winner on every server. That includes
//     servers that run writes concurrently and lock rows (FerretDB 2.x on DocumentDB). An
//     execution is created by an insert: a duplicate-key refusal (MongoDB's 11000 or the
//     engine's unique violation) is a conflict with nothing written. A seq block is taken by
//     a findAndModify of the counter's existing document, itself created by an insert. No
//     write is an upsert whose filter is the _id alone.
//   - Every bulk write (group commit, coalesced acks, timer deletes, a write of marks on the
//     board) sends its statements ordered by _id. So two bulks, of this process or of
//     another, never wait on each other's row locks in a cycle, however many are in flight
//     (Options.MaxBatchesInFlight). Every process's writes of marks lock the same few
//     holders' documents: ordered by first need, on DocumentDB under 256 chains at 4
//     processes, they timed out behind each other and lost most marks (docs/performance.md).
//     A statement the server rolled back for a lock conflict was not applied, and is settled
//     as such: a group commit reads it back and runs it alone.
//   - On the FerretDB profile, the acks written alone, or the timer deletes of one path, that
//     go out together are merged into updateMany statements, since FerretDB 1.x reads the
//     whole collection for every statement whose filter is not an _id alone. Each names its
//     documents in _id order, each document once, under an $or of the writes' own guards,
//     each of which names its _id: a document changes only by its own guard, as its own
//     update would have changed it. The other writes' paths in the statement are not in it:
//     an ack's path is its entry's seq, which one reservation handed out once in the
//     database, and the timer deletes of a statement share their path.
//   - What waits for one execution goes alone together: when an ack's or a timer delete's
//     wait runs out, every other ack and timer delete waiting for that execution goes with
//     it (but those whose caller gave up, which write nothing). On the MongoDB profile they
//     are one update guarded by every write's own guard, which unsets each path and lowers
//     the outbox count by the number of acks: the document is rewritten once, and changes
//     only when every guard holds at once, exactly as the writes one after the other would
//     have changed it. When it matched nothing, or was refused, nothing of it was applied,
//     and the writes go out one statement each, each changing the document by its own guard
//     alone. Another process's write in between finds the document as one of those writes
//     would have left it, or as before. On a row-locking engine the update holds one row's
//     lock, so it closes no cycle of waits; on MongoDB it is one single-document write.
//   - A timer's hint (the earliest fire time a sweep looks for) is never later than its
//     execution's earliest timer. On the MongoDB profile a bulk of timer deletes sends each
//     as two statements of its execution, in order: the first matches only while that timer
//     is the execution's only one, and removes it with the hint; the second matches only
//     while another timer is stored beside it, and removes the timer alone. The writes of
//     one execution that go alone together, one timer delete among them, go so too: one
//     update of the two forms, each with every other write's guard. Each form is one
//     single-document update, so the hint goes only with the last timer, whatever commit
//     lands in between. At most one of them removes the timer: after the first did, a
//     re-arm of the path at the same fire time is the execution's only timer again, which
//     the second leaves alone. When a commit between them cancels the execution's other
//     timers, neither matches: the timer stays, and is delivered again (at least once,
//     never less). A bulk of timer deletes is unordered, and no server promises to run its
//     statements in the order sent (one execution's writes that go alone together are sent
//     ordered). A server that ran the two forms the other way round could also remove a
//     re-arm at the same fire time made between them, as a repeated DeleteTimer may: the
//     contract makes a delete repeatable by path and fire time. A DueTimer with a Version
//     cannot: both forms hold its arming version too (below). The hint is never late in
//     either order. A delete that removes the last timer so spares the sweep a repair of
//     the hint.
//   - Each timer's arming is named (execstore.DueTimer.Version): the commit that arms a
//     path writes its own new version under ops.FieldTimerVersions beside the fire time, in
//     its one update, and a cancel, a delete and a move to dead remove it in theirs. A
//     delete of a DueTimer with a Version (alone, in a bulk, in the two forms above, or
//     carried by a commit, with the handler's fired timer too) is guarded by that version
//     as well as by the fire time. A commit that re-arms the path in between, even to the
//     same fire time (the timer's own handler, say), wrote another version, so the delete
//     matches nothing and the re-armed timer survives and fires: atomic on MongoDB, and
//     evaluated under the row's lock on a row-locking engine, where the delete waits for
//     the commit's lock and reads its row. Revive and the restore of a carried timer put
//     the version back as it was, since they put back the same arming. A timer armed by a
//     version of this module that did not write the version has none: it is read with
//     Version 0 and deleted by path and fire time, as before; its next re-arm writes one.
//   - Every execution is in one partition, execstore.PartitionOf(id, Store.Partitions()). A
//     commit that creates an execution stores the partition in its document. No update
//     changes it. The first Open of a database records the number of partitions, and every
//     store of the database uses it.
//   - A scan of some partitions (execstore.Partitioned) returns what the whole store's scan
//     returns, restricted to the executions of those partitions, in the same order. Each is
//     one find, on an index that leads with the partition.
//   - A read of some executions by id (execstore.Targeted) returns what the whole store's
//     read returns, restricted to those executions, in the same order. It is one find on
//     the _id index, which reads the named documents alone. Each document is read as one
//     version of it, so a concurrent commit or ack of it is wholly in the answer or wholly
//     out of it.
//   - A scan that leaves some executions out (execstore.Excluding) is the partitioned scan's
//     find with {_id: {$nin: …}} added: the same index, the ids checked on the documents it
//     selects. It is a read, and a concurrent commit or ack of an execution it does not leave
//     out is in its answer or not, as for the partitioned scan.
//   - Open gives every document written without a partition (by an earlier version of the
//     module) its partition before it returns. No manual step is needed. Partition 0's
//     scans also read documents with no partition. So a document that an earlier-version
//     process still creates is delivered by partition 0's holder until the next Open moves
//     it. That move is the only time a document changes partition.
//   - The store is an execstore.DeadLetters. Fail reads the item at the primary, then sends
//     one single-document update guarded by the item as read: still pending (a timer still
//     at that fire time), with the attempts read. A commit, an ack or another relay's Fail
//     that lands in between makes the update match nothing, and Fail reads again: so a
//     failure is never counted twice nor lost, and an item acked meanwhile is not moved. The
//     move to dead is that same one update: the entry leaves the pending field and its count
//     and enters the dead ones at once, atomic on MongoDB and under the row's lock on a
//     row-locking engine, so it is pending or dead, never both nor neither. Entries are
//     never changed once written but by Fail, so what the read saw is what is moved.
//     With Failure.MaxAttempts the same update moves the item once the attempts it writes
//     (those read, plus one) reach it: since it matches only while the stored count is
//     the one read, the count it writes is the stored count plus one whatever other relay
//     failed the item meanwhile, so of concurrent calls each writes one count, none writes
//     past MaxAttempts (the item is no longer pending once one reached it, and the others
//     read it so), and the one that reached it moved the item.
//     Revive is guarded the same way, and a timer only onto a path that holds no timer. It
//     also moves the version on by one (and drops the commit token) in that same update: a
//     commit racing it either lands first (the revive's guard on the dead item still holds,
//     it applies on top, and the commit's items are older than the revived one's new
//     version) or after, and then its version guard misses and it fails with a conflict, as
//     after any other commit; a group commit's read-back sees a version it did not write.
//     The revived item is pending again at a version no relay knew, so a relay that hands
//     over commits only when it knows every earlier version scans instead, and the item is
//     delivered in its place. The snapshot cache forgets the execution before and after the
//     revive. A commit touches none of the dead fields. Cost: one find and one update per
//     failure.
//     Discard is one update, with no read before it, guarded by the item being dead as named
//     (an entry's seq, a timer's stored fire time): it unsets it and lowers the count, moving
//     no version. Evaluated under the document's lock (MongoDB) or the row's (a row-locking
//     engine) on its latest version, of a Discard and a Revive (or two Discards, of two
//     processes) racing on one item exactly one matches; the other writes nothing and
//     reports false. A later dead timer of the same path, which replaced the one named, does
//     not match its fire time and is kept.
//   - The store is an execstore.RateRecording. RecordRates is one upsert by _id of the
//     member's sample of the minute ($min of From, $max of To and of the age, the names on
//     insert). Only one member writes a sample, one record at a time, so no two upserts race
//     on one _id (on MongoDB such a race could end in a duplicate-key error; it cannot
//     happen here); and $min and $max make the write idempotent, so a record whose outcome
//     was unknown is sent again as it was and counts once. It touches no execution.
//   - The store is an execstore.Retaining. A commit that writes a finished status records
//     its time; ExpiredIn reads, by that time, the executions finished past their cutoff
//     that hold nothing. DeleteExpired deletes them with one deleteMany per status whose
//     filter holds each execution's id with the version read, its finished status past the
//     cutoff, and no pending entry, intent, timer or dead item. The filter is evaluated
//     on each document when it is deleted (under its lock on MongoDB, on the row's latest
//     version under its lock on a row-locking engine), so a commit, a Fail or a Revive that
//     lands after the read makes the delete spare that execution, and a commit after the
//     delete finds no document: a conflict. Deleting twice deletes nothing more. Every
//     entry, intent and dead item records when its commit was made (OutboxEntry.CommittedAt),
//     which Backlog reads in one aggregation.
//   - A commit that won and wrote outbox entries, spawn intents or a timer also leaves a mark
//     for the relays of other processes that hold its partition (package relay's board), off
//     the commit's path: the commit's caller never waits for it, and a mark is never written
//     for a commit that lost or whose outcome is unknown. The marks of the commits that won
//     while one write of marks was in flight go out together in the next, one bulk write to
//     the store's "_wakes" database, one $push per holder onto that holder's document alone.
//     Concurrent writers push to the same document, atomic on MongoDB and under the row's
//     lock on DocumentDB: each keeps its own list there, so no write undoes another's. A
//     $push never upserts: one that meets a document its holder withdrew (or another store
//     purged as stale) matches nothing and writes nothing, and the store reads the holdings
//     again. Only the holder upserts its own document (its id is its own, random), one
//     publication at a time, so no two upserts race for one _id; each statement of the bulk
//     write locks one document, so no two writers wait on each other in a cycle. The
//     holders' documents are read at most once a second, only while the store commits
//     something to relay. A mark only hastens a delivery: one not written costs a poll, and
//     nothing is acked on a mark's account. A mark to a Relay's holder may carry the
//     commit's outbox entries (its events and targets 1 KiB or less), pushed in the same
//     statement to the writer's own list of carried entries, by the mark's seq: they are
//     what the commit wrote, since the mark follows the won commit, and the relay decides
//     whether they are still pending (package relay). Such a mark names the holder's latest
//     generation (wake.Holding's Gen) that a read of the holdings answered before the commit
//     was sent told (both times on this process's monotonic clock), or none: the holder had
//     published it by then, so the commit came after every hold the holder began before
//     drawing it. A publish that lands between that read and the write of marks, from
//     another process, only leaves the mark naming an older generation, which a hold begun
//     since refuses (it reads instead); the records' writes are the same upsert and $push
//     as without generations.
//   - A holder may follow its own document with a change stream (the board is a
//     wake.Follower): an aggregate with $changeStream whose $match names that document
//     alone, on the server's answer and not its name. A server that refuses it (a command
//     reply saying it does not serve it, not a lost connection) is not asked again by the
//     store for a minute. The stream only tells the holder when to read: its events carry
//     their resume tokens alone, it writes nothing, and Close ends every stream before it
//     returns.
//   - The commands of a wake-up are hedged (Stats.Hedged): a write of marks, a relay's read
//     of its marks and a targeted read (PendingOutboxOf, DueTimersOf) that has not answered
//     within four times the median latency of its kind (at least 25ms; 100ms for a write) is
//     sent once more, and the first answer is taken. One slow command (a server opening a
//     backend connection, a stalled statement) then costs one more command, not a delivery's
//     delay. A read's second answer is as good as its first. A write of marks applied twice,
//     in either order with the writes after it, pushes again marks whose Seq its holder reads
//     once (wake.Cursor skips them), or pushes older marks out of the 64 kept, which the
//     holder takes for marks missed: a scan. The second send of a write is the same bulk
//     write, its $push statements in the same order (by holder), each locking one holder's
//     document: on a row-locking engine it waits for the first's locks, never in a cycle, and
//     on MongoDB each $push is atomic. The send not taken ends with its task, or with the store for a
//     write; Close waits for it.
//   - Close stops new calls (execstore.ErrClosed), drains queued and in-flight work within its
//     context, and leaves no goroutine behind.
//
// The server profile (MongoDB or FerretDB) is picked at Open by what the server does, or
// forced with Options.Profile. Each operation picks its formulation from it. Open probes
// whether the server serves aggregation expressions in find projections
// (server.ExpressionProjections), which the MongoDB profile loads an execution with. FerretDB
// 1.x refuses them. It also silently ignores $slice in $push and $pull by condition, which
// no command that changes nothing can show. So the FerretDB profile keeps the trace ring and
// the acks off both. Store.Server reports the probe.
package aio
