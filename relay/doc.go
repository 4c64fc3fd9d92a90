// Package relay carries out what commits leave behind: a Relay delivers the outbox (every
// pending entry is handed to a handler, then acked), a Sweeper fires the durable timers
// (every due timer is handed to a handler, then deleted). Both run over the execstore.Store
// interface, so over package aio, package memstore or any other store, and every engine
// needs them: run one of each per database, in every process, with a lease so that one
// process's pair delivers and the others stand by.
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
// A sweeper over the same store (ExampleSweeper runs it); give it Options.Lease too to have
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
// A scan reads the pending items, oldest first (PendingOutbox; DueTimers, looking
// Options.PollInterval ahead). Each item is routed to one of Options.Lanes lanes by the
// execution it belongs to (an entry's TargetID, or its SourceID when it has none; a timer's
// ExecutionID); each lane hands its items to the handler one at a time. A handler's nil puts
// the item in the next ack batch (one batch in flight at a time, the next gathering
// meanwhile; AckOutbox for each entry, a store that coalesces concurrent acks sending them as
// one write; one DeleteTimers for the timers). Scans overlap delivery: the next one is sent
// as soon as at most Options.Batch items are in flight, so a relay never waits for its lanes
// to drain.
//
// A scan is sent at once when a commit through a store of this process wakes the relay (a
// store that registers its wake-up signal: aio and memstore do), every PollInterval otherwise
// (the commits of other processes), again at once after a full scan, when a failed
// execution's back-off is over, and, for a Sweeper, at the earliest fire time its last look
// ahead saw; a Sweeper is woken only by timers armed to fire before its next look. With
// Options.ScanGap, scans other than a full scan's follow-up are at least that far apart: one
// scan gathers what a stream of commits wrote, for fewer server commands.
//
// # What always holds
//
//   - At least once, ack after handler: an item is acked (deleted) only after the handler
//     returned nil for it, never before it returned. An item whose handler failed, was not
//     called, or whose ack failed for good, stays pending and is delivered again: by this
//     relay after a back-off (Options.RetryMin to RetryMax), or by the next holder of the
//     lease. Handlers must therefore be idempotent; the store's dedupe set (Commit's
//     ProcessedEventID) makes each event take effect once.
//   - Per execution, one at a time and in order: every item of one execution goes to the
//     same lane, whose handler calls never overlap, in the order the scans returned them
//     (seq order, each source's entries in commit order; timers by fire time). An item is
//     never handed out while it is in flight (queued, in a handler, or awaiting its ack).
//     After a failure, that execution's later items wait for the failed one; other
//     executions, of the same lane too, go on.
//   - Never after the ack: no item is handed out after its ack completed (by this relay;
//     across a take-over, see the lease below). A scan that began before an ack completed
//     may still return the acked item (its answer can be older than the ack), so the relay
//     counts the scans it has started and records, for every ack, that count at the moment
//     the completion is recorded (no earlier than the completion itself; until then the
//     item is still in flight). Scan n drops every item in flight and every item recorded
//     at n or more: such an ack completed after scan n began, while an ack recorded below n
//     completed before scan n began, so the store no longer holds that item and scan n
//     cannot return it. The in-flight set and the records change under one lock with the
//     filtering, so an ack is always seen in one or the other. Scans run one at a time, so
//     when scan n is filtered every record at n or less is pruned: no later scan can return
//     those items.
//   - With Options.Lease, one holder delivers: Run claims Options.LeaseKey in the idem
//     store (one key per database, and another for sweepers) and hands items out only while
//     the lease is known to hold for LeaseDuration/6 more, measured on this process's
//     monotonic clock from the moment the last successful claim or renew was sent (the
//     server started it no earlier). It renews every LeaseDuration/3. When a renew finds the
//     lease taken over (fenced), or none succeeds in time, the relay stops handing items
//     out, cancels its handlers' context, acks what they finished and stands by again. On a
//     clean stop (Close, or Run's context ending) it releases the lease once its handlers
//     are done, so that a standby takes over at once. A standby claims every
//     LeaseDuration/4: when the holder dies, the lease lapses (on the lease server's clock)
//     and the standby reclaims it (Stats.TakeOvers) at most LeaseDuration×5/4 after the
//     holder's last renewal, plus the lease server's clock error (package idem).
//   - Its writes stay right when another process writes in between, on MongoDB and on
//     engines that run writes concurrently and lock rows (FerretDB 2.x, DocumentDB). A relay
//     writes to the execution store only through the store's own guarded calls: AckOutbox
//     removes one entry if it is still there (a second ack, by this relay or another
//     process's, matches nothing and changes nothing), and DeleteTimers removes a timer only
//     if it still fires at the time the scan saw (a commit that re-armed or cancelled it in
//     between makes the delete match nothing, and the re-armed timer survives). Each is a
//     single-document update, atomic on MongoDB and taking the row's lock on a row-locking
//     engine; the store sends a batch of them as one bulk write with its statements in _id
//     order, so two relays' batches never wait on each other in a cycle. The scan that
//     precedes an ack decides nothing on its own: an item is acked only after its handler
//     returned nil, whatever another process did to it since the scan. The lease is an idem
//     claim, whose one winner package idem argues.
//   - What a lease cannot do: it fences nothing in the execution store. A holder that
//     stalls past its lease (a pause, a partition) may still be inside a handler, or about to
//     send an ack, when a standby takes over and delivers the same items: delivery is at
//     least once across take-overs too, two relays may then briefly handle one execution's
//     items at once, and the new holder may hand out an item whose ack the stalled one
//     completes while the new holder's scan is under way. Once the stalled holder runs again
//     it hands nothing more out (its lease is not live), and an ack it still sends is right
//     (its handler returned nil). Handlers that must not overlap across processes need a
//     fence of their own, such as Commit's version guard.
//   - Stopping: Close and the end of Run's context stop the relay cleanly: nothing more is
//     handed out, queued items stay pending, the handlers in flight are waited for (Close
//     does not cancel them unless its context ends; the end of Run's context does), and what
//     they finished is acked within Options.StopTimeout. No goroutine outlives Run.
//
// # Defaults
//
// PollInterval 1s, Lanes 64, Batch 256 (at most 512 items held at once), no lease,
// LeaseDuration 10s, LeaseKey "execstore/relay/outbox" (a Sweeper's
// "execstore/relay/timers"), retries from 100ms to 30s, StopTimeout 5s: see Options.
//
// # Errors
//
// Failures are counted in Stats and passed to Options.OnError as an *Error (Op says which
// operation: a scan, a handler, an ack, a lease call), and retried. Run returns only on what
// cannot be retried: a closed store or lease store, a lease key or duration the lease store
// refuses (execstore.ErrInvalid), a lease key in use by something else (ErrLeaseKeyInUse). A handler returns ErrLeavePending to leave an item pending without an
// error being counted: the way to withhold acks on purpose, in tests.
package relay
