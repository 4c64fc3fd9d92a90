// Package batch turns many small requests for server work into few server commands.
//
// Sequence hands out outbox and spawn seqs from blocks reserved on the server, one
// findAndModify per block. It reserves the next block in the background when the current one
// runs low. So a commit does not wait on a counter unless prefetch fell behind.
//
// Coalescer groups items submitted concurrently into batches, each handed to one flush. No
// timer ever delays an item.
//
// What always holds for a Sequence:
//   - Every seq it hands out lies in a block the server reserved for this Sequence alone, so
//     seqs are unique across every process sharing the counters collection.
//   - Seqs are handed out in increasing order: a Take that returns after another Take started
//     gets larger seqs. Commits of one execution are serialized by its version, so within one
//     process an execution's outbox seqs grow with its versions.
//   - Seqs left in a block when the process stops are never used: gaps are allowed, reuse is not.
//   - At most one block reservation is in flight at any time. A failed reservation is
//     reported to the Takes waiting on it, and the next Take retries it.
package batch
