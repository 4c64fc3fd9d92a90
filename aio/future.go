package aio

import (
	"context"

	"github.com/execstore/execstore/internal/async"
)

// Future is the result of an operation submitted asynchronously (CommitAsync,
// LoadForEventAsync). Done is closed when the result is ready. Result returns it once Done is
// closed. Wait returns it, or gives up when its context ends (see Wait). Handing out a Future
// costs no allocation beyond the operation's own.
type Future[T any] async.Future[T]

// future returns f as its caller sees it.
func future[T any](f *async.Future[T]) *Future[T] { return (*Future[T])(f) }

// Done returns a channel that is closed when the operation's result is ready.
func (f *Future[T]) Done() <-chan struct{} { return (*async.Future[T])(f).Done() }

// Result returns the operation's result. Call it once Done is closed. Before that, it blocks
// until the result is ready and cannot give up. Use Wait to bound the wait with a context.
func (f *Future[T]) Result() (T, error) { return (*async.Future[T])(f).Result() }

// Wait returns the operation's result once it is ready, or gives up when ctx ends. An
// operation still waiting (in the request channel, or for a batch) is then withdrawn, never
// sent, and Wait returns ctx.Err(). One already sent returns at once: a write's error matches
// execstore.ErrOutcomeUnknown and wraps ctx.Err(), a read's is ctx.Err(). An operation a
// worker runs itself returns its result, which the context it was submitted with bounds.
func (f *Future[T]) Wait(ctx context.Context) (T, error) { return (*async.Future[T])(f).Wait(ctx) }
