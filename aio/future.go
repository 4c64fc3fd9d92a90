package aio

import "github.com/execstore/execstore/internal/async"

// Future is the result of an operation submitted asynchronously (CommitAsync,
// LoadForEventAsync). Done is closed when the result is ready; Result returns it once Done is
// closed. Wait(ctx) returns it, or gives up when ctx ends: an operation still waiting (in the
// request channel, or for a batch) is then withdrawn, never sent, and Wait returns ctx.Err();
// one already sent returns at once — a write's error matches execstore.ErrOutcomeUnknown and
// wraps ctx.Err(), a read's is ctx.Err(). An operation a worker runs itself returns its result,
// which the context it was submitted with bounds.
type Future[T any] = async.Future[T]
