// Package relay carries out what commits leave behind. A Relay delivers the outbox: every
// pending entry is handed to a handler, then acked. A Sweeper fires the durable timers: every
// due timer is handed to a handler, then deleted. Both run over the execstore.Store interface,
// so over package aio, package memstore or any other store. Every engine needs them. Run one
// of each per database in every process, with a lease, and the processes share the delivery:
// each holds some of the store's partitions. Over aio the relays lease in the store's own
// database unless given Options.Lease.
//
// A relay over a MongoDB store (database db of the server at uri), with its lease in an idem
// store of its own (Example_lease runs it). deliver is the engine's own handling of one event:
// load the target execution, advance it, commit.
//
//	store, err := aio.Open(ctx, uri, aio.Options{Connection: server.Connection{Database: db}}) // the executions
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer store.Close(ctx)
//	leases, err := idem.Open(ctx, uri, idem.Options{Connection: server.Connection{Database: db + "_leases"}}) // the relays' leases
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer leases.Close(ctx)
//
//	r := relay.New(store, func(ctx context.Context, e execstore.OutboxEntry) error {
//		return deliver(ctx, e.TargetID, e.Event) // nil: the entry is acked; an error: retried
//	}, relay.Options{Lease: leases})
//	go r.Run(ctx)
//	defer r.Close(ctx)
//
// A sweeper over the same store (ExampleSweeper runs it). Give it Options.Lease too to have
// the processes share the firing; without, one process fires at a time (see below):
//
//	sw := relay.NewSweeper(store, func(ctx context.Context, t execstore.DueTimer) error {
//		return deliver(ctx, t.ExecutionID, []byte(t.Path)) // nil: the timer is deleted; an error: retried
//	}, relay.Options{})
//	go sw.Run(ctx)
//	defer sw.Close(ctx)
//
// # How it runs
//
// The executions of a store are divided into partitions when the store is an
// execstore.Partitioned, as aio and memstore are (64 by default, fixed per database). An item
// is in the partition of the execution whose document holds it: an entry's SourceID, a timer's
// ExecutionID. Without Options.Lease a relay holds every partition (or stands by, below): run
// one per database. With it, every relay of a database (one per process)
// registers itself under Options.LeaseKey, and the live relays share the partitions. Every
// LeaseDuration/4 a relay lists the live relays and works out every relay's share by one rule,
// rendezvous hashing with bounded loads: each relay has a score for each partition (a hash of
// its name and the partition's number), the relays in the order of their names have room for
// partitions/n each, the first partitions%n one more, and partition after partition goes to
// the relay of the highest score with room left. Relays that list the same members agree,
// the shares are at most one apart, and a relay that joins or leaves moves few partitions
// besides its own share (1.29 times as many over random names, 64 partitions and 1 to 8
// relays, against 4.48 times for the (p mod n)-th relay, the rule of earlier versions). A
// relay registers with its rule, and one of another rule, as a relay of an earlier version, is
// left out of the share and reported (ErrPartitionsDisagree through Options.OnError): until
// one version is left, each side shares every partition among its own, and a partition
// wanted on both sides goes to the first to claim it. It claims each partition it wants
// under a lease of its own, which succeeds once the previous holder released it or its lease
// lapsed, at most 4 claims at a time. A look that finds its own renewal late (unanswered after
// LeaseDuration/6) or failed claims nothing, unless the look before it did the same: the
// leases it holds come first, and on a lease server that runs one write at a time a claim
// would queue ahead of their renewal. It hands over each partition it holds and no longer
// wants: it stops handing the partition's items out, waits for its handlers and acks, and
// releases the lease. Handlers still running LeaseDuration after the hand-over began have
// their context cancelled (what they leave unfinished stays pending, for the next holder); the
// lease is kept until they returned, whatever they do with their context. A store that is not
// partitioned has one partition, and one relay of many holds it.
//
// A relay without Options.Lease over a store that offers a lease store (aio's
// Store.LeaseStore: an idem store in a database named after the store's, "shop_leases" for
// "shop") delivers only while it holds one lease there, the sole lease LeaseKey+"/sole", and
// holds every partition under it; its renewal is one single-document write. Of concurrent
// claims of the key at most one gets it, on MongoDB and on a row-locking engine alike
// (package idem argues it); the other relays stand by: each reports an *Error matching
// ErrStandingBy through Options.OnError and logs a warning, once per stand-by, and claims
// again every LeaseDuration/4. So one takes over once the holder stopped (Run releases the
// lease after its handlers returned and their acks were sent), or within LeaseDuration×5/4
// of the last renewal of a holder that died. The sole lease is renewed, lost and given up as
// a partition's lease is (below). Over a store that offers no lease store (memstore, a store
// of your own) a relay without a lease delivers every partition, whatever other relays do.
// Relays given Options.Lease do not see those without: give every relay of a database a
// lease, or none.
//
// A scan reads the pending items of every partition the relay holds, oldest first:
// PendingOutboxIn for a Relay, DueTimersIn for a Sweeper. A Sweeper reads two PollIntervals
// ahead, and the timers not yet due wait in memory for their fire time. When it comes, a scan
// sent at or after it confirms them: one scan for all the timers that come due together (at
// most one per ScanGap). Each item is routed to one of Options.Lanes lanes by the execution it
// belongs to. That is an entry's TargetID, or its SourceID when it has none, and a timer's
// ExecutionID. An execution's items queued or in a handler share one lane; an execution with
// none takes a lane with none when there is one, else the least loaded, so that it waits
// behind another only when it came while no lane was idle. Each lane hands its items to the handler one at a time. A handler's nil puts
// the item in the next ack batch. One batch is in flight at a time, and the next gathers
// meanwhile. A batch of entries is one AckOutbox for each entry, and a store that coalesces
// concurrent acks sends them as one write. A batch of timers is one DeleteTimers. Scans
// overlap delivery: the next one is sent as soon as at most Options.Batch items are in flight,
// those waiting for their ack counting only beyond 2×Batch of them (a store may hold an ack
// until a later commit carries it): at most 4×Batch items are in flight, besides timers come
// due in memory. Those do not count: only a scan sent after their fire time confirms them, so
// however many wait, that scan is sent, and takes the items its result holds before them
// (earlier fire times) until 2×Batch others count, so that the next holds them.
//
// With Options.CommitRemovesTimer, a timer's handler that commits on the timer's execution
// with the context it was given, through an aio store of this process, removes the timer with
// that commit, in the same write (see package aio): the timer needs no delete (Stats.Carried).
// That commit must be the handler's last act: the timer is then gone before the handler
// returned. If the handler fails after it, or returns ErrLeavePending, the sweeper first puts
// the timer back (Stats.Restored) and handles the failure as any other. The exceptions are
// reported: ErrNotRestored when the execution committed again between the handler's commit and
// its failure (the timer's handling stands with that commit), OpRestore when the put-back
// failed after its retries. Without the option, and over other stores, every timer is deleted
// once its handler returned nil.
//
// A commit through a store of this process (aio and memstore) hands what it wrote to the relay
// in memory, with no scan, when the relay holds the execution's partition. A commit through
// a store of another process wakes the relay through the store's board, when the store has
// one (aio's) and the relay holds its partitions under a lease (Options.Lease, or the sole
// lease): the relay publishes the partitions it holds there, every commit that wrote entries
// (or armed a timer within the Sweeper's look-ahead) leaves their holder a mark naming its
// execution, and the relay reads its marks every Options.WakeInterval, one find of one
// document by its id, and reads the executions marked at once, by their ids (Stats.Woken),
// or takes the entries a mark carries with no read when it may (see "A mark only hastens").
// A scan is sent when the relay starts, after it takes a partition, every PollInterval (for
// the commits no mark told of), after a full scan, when a failed execution's back-off is
// over, after a local commit whose items could not be handed over, when marks name
// executions of its partitions, and when timers read ahead come due. With Options.ScanGap,
// scans other than a full scan's follow-up are at least that far apart.
//
// The board is a collection of the database named after the store's with "_wakes" appended,
// one document per holder. What it costs: a relay that holds partitions reads its document
// once per WakeInterval while marks come, backing off to once per 4×WakeInterval (80ms by
// default) while its reads find none, and writes it when its partitions change and every 10s.
// A server slow to answer for a while spaces the reads further: after a round (its publish,
// when due, and its read) a relay waits at least four times as long as its calls to the
// board take, the median of the last 8, so that on a busy server its reads take at most a
// fifth of its time and leave room for the leases' renewals (the wait stops at
// PollInterval, and each call to the board is bounded by PollInterval); one slow read does
// not space them, nor does the relay's own work. Partitions it takes meanwhile are published
// at its next tick, a WakeInterval later, unless a call to the board is under way or the
// last publish failed (the next round tries again). A store that commits reads the holders'
// documents at most once a second, only while it commits something to relay, and writes the
// marks of the commits of one round trip in one bulk write, one statement per holder: while
// one write is in flight, the next gathers.
//
// Where the server has change streams (a MongoDB replica set or sharded cluster), the relay
// also follows its document with one (aio's board is a wake.Follower), chosen by what the
// server does: the stream is opened by an aggregate with $changeStream, which changes
// nothing, and a server that refuses it (an error reply saying it does not serve it: a
// standalone server, FerretDB, DocumentDB) is asked again about a minute later (the relay
// tries every 10s, and the store answers from the refusal it holds). While the stream is
// open, the relay reads its marks when a change of its document comes, no sooner than
// WakeInterval after its last read began and spaced after it as above, and otherwise once
// per PollInterval; it still publishes its partitions every 10s. What it costs then: one
// getMore per second while the document does not change (each waits up to a second for a
// change, holding one of the client's connections), and at most one read of the document
// per WakeInterval while changes come, whose events carry nothing but their resume token.
// When the stream ends, the relay reads every WakeInterval again and follows again 10s after
// its last try. A change pushed, lost or late only hastens or delays a read, as a mark does.
//
// A scan owed for the relay's own reasons (an execution's back-off over, a local commit not
// handed over, items held back, timers come due) reads only the executions it is owed for, by
// their ids, when the store is an execstore.Targeted (aio and memstore are) and they are at
// most Batch: the executions some of whose items the relay left in the store, and those of the
// timers come due (Stats.Targeted counts these reads). On MongoDB and DocumentDB that is one
// find on the _id index, which reads those documents alone, where a scan of the partitions
// reads the pending-work indexes (on DocumentDB, every superseded entry since the last vacuum
// too). The start, a partition taken, a poll, a full scan and a failed scan are followed by a
// scan of the partitions.
//
// Each scan of the partitions is also kept as their Backlog (Relay.Backlog, Sweeper.Backlog):
// per partition held, the items it returned, at least that many when it stopped at its limit,
// and since when the oldest waits. The gauges execstore.backlog.items and
// execstore.backlog.age report it, one point per partition held, with the holder. They cost no
// command: the figures are the last scan's, at most a PollInterval old while the relay runs.
// The scans read only pending work, so a partition's dead items are counted apart, by one
// command for all the partitions held every Options.DeadCountInterval and when one is taken
// (Backlog's Dead, the gauge execstore.backlog.dead).
//
// Over a store that keeps rate samples (execstore.RateRecording: aio), a relay records what
// it did every Options.RatesInterval: its handler calls that returned nil and that failed,
// the items it moved to dead, the oldest wait its scans found. One write of its own sample
// of the minute, none when it did nothing and found nothing waiting: what the UI's overview
// charts, and execstore rates prints, with no metrics collector.
//
// # What always holds
//
//   - At least once, ack after handler: an item is acked (deleted) only after the handler
//     returned nil for it, never before it returned. An item stays pending and is delivered
//     again when its handler failed or was not called, or when its ack failed for good. It is
//     delivered again by this relay after a back-off (Options.RetryMin to RetryMax), or by the
//     next holder of its partition. Handlers must therefore be idempotent. The store's dedupe
//     set (Commit's ProcessedEventID) makes each event take effect once.
//   - Dead, not lost: over an execstore.DeadLetters store (aio, memstore) each failed delivery
//     is recorded with the item before the item is released, and the Options.MaxAttempts-th
//     failure (or one wrapping ErrPermanent) moves the item from pending to dead in that same
//     single-document write, guarded by the item still being pending. The store counts: it
//     moves the item once the attempts it holds reach MaxAttempts
//     (execstore.Failure.MaxAttempts), so relays that deliver one item at once, across a
//     take-over, never record more than MaxAttempts. A record whose outcome is unknown is read
//     back from the dead list: the item found dead is counted and told, as moved by it (when a
//     record of another relay moved it meanwhile, both count and tell it). A dead item is
//     listed (DeadLetters.ListDead), counted (Stats.Dead, the metric execstore.relay.dead,
//     DeadLetters.CountDead) and put back by DeadLetters.Revive; its execution's later items
//     go on at once. So every item is delivered, or dead with its attempts and last error.
//   - One holder per partition: a partition is held under a lease of Options.Lease (a Leases:
//     an idem store, whose one holder package idem argues, or memstore.Leases in tests). A
//     relay hands an item out only while its partition's lease is known to hold for
//     LeaseDuration/6 more. That is measured on this process's monotonic clock from the moment
//     the last successful claim or renew was sent (the server started it no earlier). A relay
//     renews its leases every LeaseDuration/3, all in one write, without waiting for the
//     renewal before it: each is awaited for up to LeaseDuration and extends the leases from
//     when it was sent, never shortening them. So one slow call loses nothing. A lease server
//     that answers every write within LeaseDuration×2/3 keeps every lease a relay holds (past
//     LeaseDuration/2 the handing out pauses until the next answer). A new lease needs more:
//     its first renewal can be sent only once its claim's answer came, and both must be
//     answered within the lease, so claims hold only while the lease server answers within
//     LeaseDuration/2 (a claim answered after its lease stopped being live is given back at
//     once). Lengthen the lease when answers can take longer. A partition whose renew finds
//     its lease taken over (fenced) is dropped alone; one whose lease runs out unrenewed is
//     dropped too: nothing more of it is handed out, and its handlers' context is cancelled. A
//     partition claimed again starts a new hold that knows nothing of its sources: an item of
//     the dropped hold still in a handler comes ahead of its execution's items queued behind
//     it, and takes them back to the store with it when it fails. A partition taken again
//     after the relay's own lease of it ran out counts as a re-take (Stats.ReTakes), not a
//     take-over. The share rule decides only which partitions a relay asks for: relays that
//     list different members, or follow different rules, may want the same partition, and the
//     lease gives it to one of them; a partition nobody wants while the members disagree
//     waits for the next look that agrees.
//   - Nothing pending is left unread: a relay scans every partition it holds at least every
//     PollInterval while it may hand the partition's items out and has room (at most Batch
//     items in flight). A poll that finds nothing it may scan (no partition held, or every
//     lease's renewal late) comes again a PollInterval later, so an item committed by another
//     process waits no longer than PollInterval past the moment its partition may be handed
//     out again, or, when an entry of its source is in the relay's flight (below), three
//     past the later of its commit and that entry's handler call, or the first poll after
//     those at which a lane is idle and no entry of the source's has been settling (its ack
//     written) for less than ten; a late renewal that makes a lease live again has the relay
//     scan at once.
//   - A Relay's scan of its partitions returns little the relay holds, when the store can
//     leave executions out (execstore.Excluding; aio and memstore can): it leaves out each
//     source with entries in flight that is not soiled (see below), at most
//     execstore.MaxTargetedIDs of them: for two PollIntervals in a row, and past them while
//     every lane is busy (an entry read then would only wait in a lane's queue) or while each
//     of its entries in flight has been settling (its ack or its failure's record written)
//     for less than ten PollIntervals, or in its handler or settling for less than two (a
//     backlog that drains is not read again). It could hand out none of their entries in flight; their
//     other entries are read by a targeted read (a mark, a commit not handed over, an entry
//     left in the store), or by the first scan once none is in flight or once it is no
//     longer left out.
//     After a scan cut at its limit or at the cap, whose sources may have entries it did not
//     return, or marks missed, the next scan leaves nothing out. A scan tells the relay
//     nothing of the sources it left out: it clears none of their soiling. The backlog adds
//     their entries in flight at the scan's answer. A Sweeper's scans leave nothing out: they
//     read timers ahead of their fire time, which a scan that left their execution out would
//     not.
//   - The relays of a lease key agree on the partitions, decided by one winner: before it
//     claims anything, a relay claims the record LeaseKey/partitioning with a fingerprint that
//     names its number of partitions (1 for a store that is not an execstore.Partitioned). The
//     first claim to get a token writes that number and completes the record for good; a
//     completed record never changes. A relay whose number the record names goes on; any other
//     is refused by the lease store's fingerprint check, claims nothing, and Run returns
//     ErrPartitionsDisagree. No clocks or registration times are compared, so a stalled relay,
//     a lapsed registration or a slow write cannot make two numbers both go on. Change the
//     number with a new LeaseKey.
//   - Per execution, one at a time and in order, within a relay: the items of one execution
//     queued or in a handler are in one lane, whose handler calls never overlap; its next
//     item takes a lane anew only once none is. Each source's entries come in
//     commit order, and each execution's timers by fire time. An item is never handed out
//     while it is in flight (waiting for its fire time, queued, in a handler, or awaiting its
//     ack). After a failure, that execution's later items wait for the failed one. Other
//     executions go on, those of the same lane too. An item that leaves flight without its
//     ack, for any cause (a failure, its partition's hold ended or paused), takes its
//     execution's items queued behind it out of flight with it, and soils its source: the next
//     items of the execution are those a scan returns, in the store's order.
//   - Never after the ack: no item is handed out after its ack completed, by this relay. A
//     scan that began before an ack completed may still return the acked item, since its
//     answer can be older than the ack. One state machine owns every item the relay handed
//     out, from its take to its end (flight.go: waiting, unconfirmed, queued, handling,
//     acking, failing), and one rule decides what a scan's result, or a local commit, hands
//     out (flight.decide). It counts epochs: each scan, and each local commit, begins one.
//     Each ack, move to dead and release records the epoch it completed at. What began at
//     epoch n drops every item in flight or recorded at n or more, since such an ack completed
//     after it began (Stats.Skipped counts the scans' drops). An ack recorded below n
//     completed before it began, so the store no longer holds that item and the scan cannot
//     return it. A record is kept while a scan or commit begun at its epoch or before is open,
//     and pruned after. The states and the records change under one lock with the decision.
//   - A hand-over without a scan keeps both: the relay learns of a local commit before it is
//     sent and once its outcome is known, before the committer does. A scan may read what the
//     commit wrote before its outcome is known, and hand it out. The hand-over decides by the
//     commit's epoch, as that scan would: it hands out only the items neither in flight nor
//     acked since, and holds all back when their execution waits (a retry, a failure's record,
//     an item released since). So an item is handed out once, by a scan or by the hand-over.
//     The items are handed over only when every earlier item of the execution is known to the
//     relay: the commit is the execution's first, or follows the last one this relay saw, and
//     no item of the execution was left in the store since (a commit not handed over or whose
//     outcome is unknown, an item released or held back). Otherwise the relay scans, and hands
//     over again once a scan begun after that read the execution's items in full, while the
//     partition was handed out from the scan's send to its answer. It also takes only commits
//     sent while it held the partition, under the same hold, and what a hold knows is learned
//     under it alone: a new hold starts knowing nothing.
//   - A targeted read is a scan of the executions it names: it learns of those alone. The
//     relay knows which executions it must read again: each whose items it left in the store
//     (released, held back, or written by a commit it did not hand over, or named by a mark on
//     the board) is soiled when they
//     were left (sources.go), and each timer come due names its execution. A read of execution
//     S reads S's document in one find, so it returns every pending item of S as one version
//     of the document had them, before or after any concurrent commit or ack of S (atomic on
//     MongoDB, under the row lock on DocumentDB), as a scan of S's partition would. It begins
//     an epoch and is decided as a scan is. When it read every pending item of the executions
//     it names (it was not cut by its limit), it clears the soiling of those executions alone,
//     and drops the timers waiting for a confirmation of those executions alone that it did
//     not return. An execution it did not name stays soiled, and is read by a later read or
//     scan. What other processes commit to the partitions is found by the reads their marks
//     ask for, and by the polls' scans of the partitions.
//   - A mark only hastens. A mark names an execution, and the version its commit created; the
//     relay reads it as a local commit not handed over. A relay that knows the execution up
//     to that version already (a scan read it, or it handed the commit's items over) owes no
//     read for the mark, and a scan that reads the execution at that version or later,
//     whenever it began, pays the read the mark owed (entries; a timer's mark is paid by a
//     scan begun after it). A mark to a Relay may also carry the outbox entries its commit
//     wrote (aio's board carries a commit's whose events are small; a mark is written only
//     once its commit won). The relay takes them with no read only when its hold hands out,
//     the commit was sent while the hold held, it knows the execution up to the version
//     before (every earlier entry is in flight or no longer pending), no scan or hand-over
//     of the hold read that version or a later one (none of them was handed out already: an
//     ack from before the mark was read may be forgotten, so the version read decides, not
//     the epoch), and flight.decide, at an epoch begun as the marks are read, hands every one
//     out. That is what a targeted read sent then would hand out. Otherwise the mark owes
//     the read. The relay knows when a commit was sent by generations: it draws one, later
//     than any before, when a hold begins (and when a hold forgets what it knew of its
//     sources, past 16,384 of them) and publishes the latest with its partitions
//     (wake.Holding's Gen); a store names it on a mark that carries entries only when it
//     had read it before the commit was sent, and the relay takes the entries only for a
//     generation at or after the hold's. A commit sent before the hold began may have been
//     delivered and acked under an earlier hold, of this relay or another, whose records
//     the hold does not have: its scans may know the execution only up to an earlier entry
//     still pending. A mark lost (the write failed, the store's intake was full), late,
//     written to a holder that no longer holds the partition, never written (a store that
//     read the holders before the relay published, up to a second), or more marks between
//     two reads than the document keeps (64 per store), delays a delivery until a poll at
//     most (three, see above), which reads the partitions themselves. A store numbers its
//     marks to each holder (wake.Mark's Seq): a gap in what the holder reads (marks pushed
//     out of the document, or a write of marks that failed followed by one that did not) is
//     marks missed, and a scan of the partitions that leaves nothing out follows. Of two
//     holders that list a partition (one handing it over, one taking it), the stores
//     mark the one that published last.
//   - A timer cancelled before its fire time does not fire: a timer read ahead, or handed
//     over, waits in memory, and is handed out only once a scan sent at or after its fire time
//     returns it. A complete scan that does not return it drops it (Stats.Cancelled): a commit
//     of any process cancelled or re-armed it. A local commit that cancels or re-arms it drops
//     it at once.
//   - Moving a partition while a third process commits to it. Relay A hands partition p over
//     to relay B, while process C commits to execution S of p. A stops handing p's items out,
//     waits for its handlers, acks what they finished, and only then releases the lease. B's
//     claim succeeds only after that release, or after A's lease lapsed, and B's first scan of
//     p is sent after its claim. C's commit is one write of S's document: atomic on MongoDB,
//     and holding S's row lock on a row-locking engine (FerretDB 2.x, DocumentDB), where a
//     read sees the row as it was before or after the commit, never half of it. So B's scan
//     reads S with the commit's items or without them. With them, B delivers them. Without
//     them, B's next scan does, or C's hand-over when C is B's process and began the commit
//     after B took p. A's acks completed before A released p, so B's scan, sent after, no
//     longer sees those items. A commit of C that began while A held p is not handed over to A
//     once A stopped handing p out, nor to B, which did not hold p when it began: a scan finds
//     its items. An ack removes one entry by its seq, and a commit never writes an existing
//     seq, so the two commute, in either order and under the row lock.
//   - Take-over: when a holder dies, its leases lapse (by the lease server's clock). The other
//     relays see it gone from the list of live relays at their next look, at most
//     LeaseDuration/4 later, and claim its partitions. That is at most LeaseDuration×5/4 after
//     the holder's last renewal, plus the lease server's clock error (package idem).
//     Stats.TakeOvers counts them.
//   - Its writes stay right when another process writes in between. That holds on MongoDB and
//     on engines that run writes concurrently and lock rows (FerretDB 2.x, DocumentDB). A
//     relay writes to the execution store only through the store's own guarded calls.
//     AckOutbox removes one entry if it is still there. A second ack, by this relay or another
//     process's, matches nothing and changes nothing. DeleteTimers removes a timer only if it
//     still fires at the time the scan saw. A commit that re-armed or cancelled it in between
//     makes the delete match nothing, and the re-armed timer survives. Each is a
//     single-document update. It is atomic on MongoDB and takes the row's lock on a
//     row-locking engine. The store sends a batch of them as one bulk write with its
//     statements in _id order, so two relays' batches never wait on each other in a cycle. An
//     item is acked only after its handler returned nil, whatever another process did to it
//     since the scan.
//   - What a lease cannot do: it fences nothing in the execution store. A holder may stall
//     past its lease (a pause, a network partition). It may then still be inside a handler, or
//     about to send an ack, when another relay takes the partition over and delivers the same
//     items. So delivery is at least once across take-overs too. Two relays may then briefly
//     handle one execution's items at once. Once the stalled holder runs again it hands
//     nothing more out, since its lease is not live. An ack it still sends is right, since its
//     handler returned nil. Handlers that must not overlap across processes need a fence of
//     their own, such as Commit's version guard. One execution's items also come from several
//     partitions when several sources send to it, so two relays may handle items for one
//     target at once.
//   - Stopping: Close and the end of Run's context stop the relay cleanly. Nothing more is
//     handed out, and queued items stay pending. The handlers in flight are waited for. Close
//     does not cancel them unless its context ends. The end of Run's context does. What they
//     finished is acked within Options.StopTimeout. The leases are renewed until then,
//     whatever the handlers do with their context, so no other relay takes a partition over
//     while a handler of this one runs. Then the leases are released, each within StopTimeout
//     of a context of its own, so that the other relays take the partitions over at once. The
//     retention's and the dead count's calls in flight are cancelled at once: a server that
//     holds them does not hold the stop. No goroutine outlives Run.
//   - A failing ack slows no other: it is retried after a back-off of its own while the item
//     stays in flight, and the other acks go on. Once the item's partition is being handed
//     over or was dropped, it is tried again at once, whatever back-off it had reached, then
//     every RetryMin or LeaseDuration/12, whichever is shorter, and given up after a few tries
//     (released: delivered again by the next holder), so a hand-over never waits on it long.
//
// # How it is checked
//
// Beside the tests of each case, TestSimulation runs relays and sweepers of several processes
// over one memstore and one memstore.Leases in a testing/synctest bubble (virtual time), under
// a seeded plan of faults: store and lease calls answered late (up to past the lease), failed,
// or applied with an unknown outcome; processes crashed and restarted; handlers that fail for
// a while, for ever, for good, panic or ignore their context; revives, re-arms and cancels; a
// relay of another partition count. A checker then asserts over the history the promises
// above: at least once and nothing lost, never after the ack, per execution in order, one
// holder per partition, attempts at most MaxAttempts and every dead item told, a timer
// cancelled before its fire time never fired after, a re-arm that stands, another partition
// count refused, no lease lost while the lease server answers within its bound. What each
// failure record did is read from the store: at most MaxAttempts failures per item, the
// MaxAttempts-th (or a permanent one) moves it, it is delivered no more until revived, and the
// relay whose write moved it tells OnDead. Processes hand their partitions over, so one item's
// failures come from several relays. Within 2,000 seeds it finds a relay that stops passing
// MaxAttempts to the store, a store whose Fail ignores Failure.MaxAttempts, and a relay that
// misses a move to dead made by the store's count; with EXECSTORE_SIM_PAUSE=1 (processes
// paused past their leases), a relay that decides dead itself from the attempts it read.
// EXECSTORE_SIM_SEEDS=N sets the number of seeds; a failure prints the command that replays
// its seed.
//
// # Defaults
//
// PollInterval 1s, WakeInterval 20ms, Lanes 64, Batch 256 (at most 512 items held at once), MaxAttempts 25, no
// lease, LeaseDuration 10s, LeaseKey "execstore/relay/outbox" (a Sweeper's
// "execstore/relay/timers"), retries from 100ms to 30s, StopTimeout 5s: see Options. A relay
// registers itself under LeaseKey/members/<name> and holds partition p under
// LeaseKey/partitions/<p>; a store that is not partitioned has the one lease LeaseKey.
// LeaseKey/partitioning holds the number of partitions the relays of LeaseKey share. Give
// Options.Lease an idem store of its own, with no Pool shared with the execution store, on a
// database of its own (the example's db+"_leases"): its calls then never wait behind the
// store's data traffic, neither in the process nor on a server that runs one write per
// database at a time, as the embedded server does.
//
// PollInterval and LeaseDuration were measured under load: four relay processes, each a Relay
// and a Sweeper, beside two CPU hogs on a 2-core machine, kept every lease on both servers at
// 1s and 10s. Polling at 250ms there, their scans (each reading every execution on the
// embedded server) kept that server's CPU so busy that renewals came back after the leases ran
// out. Poll faster only where a scan is cheap, and lengthen the lease when the lease server's
// answers can take longer than LeaseDuration/2.
//
// # Errors
//
// Failures are counted in Stats, passed to Options.OnError as an *Error, and retried. The
// Error's Op says which operation failed: a scan, a handler, an ack, a lease call. Run returns
// only on what cannot be retried. That is a closed store or lease store, a lease key or
// duration the lease store refuses (execstore.ErrInvalid), a lease key in use by something
// else (ErrLeaseKeyInUse), or relays that disagree on the partitions (ErrPartitionsDisagree).
// A handler returns ErrLeavePending to leave an item pending without an error being counted or
// recorded. It is the way to withhold acks on purpose, in tests. It returns an error wrapping
// ErrPermanent for an item that will never succeed: it is moved to dead at once. A handler's
// panic is recovered and fails the delivery as its error would, with a *PanicError that holds
// the panic's value (which it unwraps to, when it is an error) and stack; the relay goes on.
// An *Error logged with log/slog gives its op, item, error and a panic's stack attributes of
// their own (Error.LogValue), and items are named as the execstore CLI names them.
package relay
