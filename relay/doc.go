// Package relay carries out what commits leave behind. A Relay delivers the outbox: every
// pending entry is handed to a handler, then acked. A Sweeper fires the durable timers: every
// due timer is handed to a handler, then deleted. Both run over the execstore.Store
// interface, so over package aio, package memstore or any other store. Every engine needs
// them. Run one of each per database, in every process, with a lease so that one process's
// pair delivers and the others stand by.
//
// A relay over a MongoDB store (database db of the server at uri), with its lease in an idem
// store beside it (Example_lease runs it). deliver is the engine's own handling of one event:
// load the target execution, advance it, commit.
//
//	store, err := aio.Open(ctx, uri, aio.Options{Connection: server.Connection{Database: db}}) // the executions
//	if err != nil {
//		log.Fatal(err)
//	}
//	defer store.Close(ctx)
//	leases, err := idem.Open(ctx, uri, idem.Options{Connection: server.Connection{Database: db}}) // the relays' lease
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
// one process fire:
//
//	sw := relay.NewSweeper(store, func(ctx context.Context, t execstore.DueTimer) error {
//		return deliver(ctx, t.ExecutionID, []byte(t.Path)) // nil: the timer is deleted; an error: retried
//	}, relay.Options{})
//	go sw.Run(ctx)
//	defer sw.Close(ctx)
//
// # How it runs
//
// A scan reads the pending items, oldest first: PendingOutbox for a Relay, DueTimers for a
// Sweeper, which looks Options.PollInterval ahead. Each item is routed to one of
// Options.Lanes lanes by the execution it belongs to. That is an entry's TargetID, or its
// SourceID when it has none, and a timer's ExecutionID. Each lane hands its items to the
// handler one at a time. A handler's nil puts the item in the next ack batch. One batch is in
// flight at a time, and the next gathers meanwhile. A batch of entries is one AckOutbox for
// each entry, and a store that coalesces concurrent acks sends them as one write. A batch of
// timers is one DeleteTimers. Scans overlap delivery: the next one is sent as soon as at most
// Options.Batch items are in flight. So a relay never waits for its lanes to drain.
//
// A scan is sent at once when a commit through a store of this process wakes the relay. That
// takes a store that registers its wake-up signal, as aio and memstore do. Otherwise a scan is
// sent every PollInterval, for the commits of other processes. A scan is also sent at once
// after a full scan, and when a failed execution's back-off is over. A Sweeper also scans at
// the earliest fire time its last look ahead saw. A Sweeper is woken only by timers armed to
// fire before its next look. With Options.ScanGap, scans other than a full scan's follow-up
// are at least that far apart. One scan then gathers what a stream of commits wrote, for
// fewer server commands.
//
// # What always holds
//
//   - At least once, ack after handler: an item is acked (deleted) only after the handler
//     returned nil for it, never before it returned. An item stays pending and is delivered
//     again when its handler failed or was not called, or when its ack failed for good. It
//     is delivered again by this relay after a back-off (Options.RetryMin to RetryMax), or
//     by the next holder of the lease. Handlers must therefore be idempotent. The store's
//     dedupe set (Commit's ProcessedEventID) makes each event take effect once.
//   - Per execution, one at a time and in order: every item of one execution goes to the
//     same lane, whose handler calls never overlap. They come in the order the scans
//     returned them: seq order, each source's entries in commit order, and timers by fire
//     time. An item is never handed out while it is in flight (queued, in a handler, or
//     awaiting its ack). After a failure, that execution's later items wait for the failed
//     one. Other executions go on, those of the same lane too.
//   - Never after the ack: no item is handed out after its ack completed, by this relay
//     (across a take-over, see the lease below). A scan that began before an ack completed
//     may still return the acked item, since its answer can be older than the ack. The
//     relay drops such items, and every item still in flight, from each scan before it
//     hands anything out (Stats.Skipped counts them). To tell them apart, the relay counts
//     the scans it has started. Each ack records that count once the ack completed. Until
//     then the item is still in flight. Scan n drops every item recorded at n or more,
//     since such an ack completed after scan n began. An ack recorded below n completed
//     before scan n began, so the store no longer holds that item and scan n cannot return
//     it. The in-flight set and the records change under one lock with the filtering, so an
//     ack is always seen in one or the other. Scans run one at a time. So once scan n is
//     filtered, every record at n or less is pruned: no later scan can return those items.
//   - With Options.Lease, one holder delivers: Run claims Options.LeaseKey in the idem
//     store. There is one key per database, and another for sweepers. Run hands items out
//     only while the lease is known to hold for LeaseDuration/6 more. That is measured on
//     this process's monotonic clock from the moment the last successful claim or renew was
//     sent (the server started it no earlier). It renews every LeaseDuration/3. A renew may
//     find the lease taken over (fenced), or none may succeed in time. The relay then stops
//     handing items out, cancels its handlers' context, acks what they finished and stands
//     by again. On a clean stop (Close, or Run's context ending) it releases the lease once
//     its handlers are done, so that a standby takes over at once. A standby claims every
//     LeaseDuration/4. When the holder dies, the lease lapses (on the lease server's clock).
//     The standby reclaims it (Stats.TakeOvers) at most LeaseDuration×5/4 after the
//     holder's last renewal, plus the lease server's clock error (package idem).
//   - Its writes stay right when another process writes in between. That holds on MongoDB
//     and on engines that run writes concurrently and lock rows (FerretDB 2.x, DocumentDB).
//     A relay writes to the execution store only through the store's own guarded calls.
//     AckOutbox removes one entry if it is still there. A second ack, by this relay or
//     another process's, matches nothing and changes nothing. DeleteTimers removes a timer
//     only if it still fires at the time the scan saw. A commit that re-armed or cancelled
//     it in between makes the delete match nothing, and the re-armed timer survives. Each
//     is a single-document update. It is atomic on MongoDB and takes the row's lock on a
//     row-locking engine. The store sends a batch of them as one bulk write with its
//     statements in _id order, so two relays' batches never wait on each other in a cycle.
//     The scan that precedes an ack decides nothing on its own. An item is acked only after
//     its handler returned nil, whatever another process did to it since the scan. The
//     lease is an idem claim, whose one winner package idem argues.
//   - What a lease cannot do: it fences nothing in the execution store. A holder may stall
//     past its lease (a pause, a partition). It may then still be inside a handler, or about
//     to send an ack, when a standby takes over and delivers the same items. So delivery is
//     at least once across take-overs too. Two relays may then briefly handle one
//     execution's items at once. The new holder may hand out an item whose ack the stalled
//     one completes while the new holder's scan is under way. Once the stalled holder runs
//     again it hands nothing more out, since its lease is not live. An ack it still sends is
//     right, since its handler returned nil. Handlers that must not overlap across processes
//     need a fence of their own, such as Commit's version guard.
//   - Stopping: Close and the end of Run's context stop the relay cleanly. Nothing more is
//     handed out, and queued items stay pending. The handlers in flight are waited for.
//     Close does not cancel them unless its context ends. The end of Run's context does.
//     What they finished is acked within Options.StopTimeout. No goroutine outlives Run.
//
// # Defaults
//
// PollInterval 1s, Lanes 64, Batch 256 (at most 512 items held at once), no lease,
// LeaseDuration 10s, LeaseKey "execstore/relay/outbox" (a Sweeper's
// "execstore/relay/timers"), retries from 100ms to 30s, StopTimeout 5s: see Options.
//
// # Errors
//
// Failures are counted in Stats, passed to Options.OnError as an *Error, and retried. The
// Error's Op says which operation failed: a scan, a handler, an ack, a lease call. Run
// returns only on what cannot be retried. That is a closed store or lease store, a lease key
// or duration the lease store refuses (execstore.ErrInvalid), or a lease key in use by
// something else (ErrLeaseKeyInUse). A handler returns ErrLeavePending to leave an item
// pending without an error being counted. It is the way to withhold acks on purpose, in
// tests.
package relay
