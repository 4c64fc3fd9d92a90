// Package async is the machinery every store of the module shares to run its operations:
// an operation becomes a Request on a pool (package pool), and its caller waits on a Future
// with the context rules of the execstore contract:
//
//   - an operation still queued when its caller's context ends is withdrawn, never sent, and
//     the caller gets the context's error;
//   - a write whose caller's context ends after it was sent is answered at once with the
//     error the store gives an abandoned write (an execstore.ErrOutcomeUnknown wrapping the
//     context's error); a read's caller gets the context's error;
//   - an operation a worker passes on to a coalescer (package batch) keeps these rules
//     through its Handoff: exactly one of the caller and the flush settles it.
//
// A store is then its operations (package ops and the like) and a thin type that builds
// requests; see package aio.
package async
