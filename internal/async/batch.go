package async

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/batch"
)

// Hand passes item, whose operation h tracks, to coalescer c; if c refuses it (the caller's
// context ended, or c is closing), the operation is settled with the refusal.
func Hand[T any](ctx context.Context, c *batch.Coalescer[T], item T, h *Handoff) {
	if err := c.Submit(ctx, item); err != nil {
		h.Refuse(err)
	}
}

// TakeLive marks sent the items of a batch that are still wanted and returns them with their
// callers' contexts. The others are settled here, never sent: those whose context ended get
// its error, and every one gets execstore.ErrClosed once stop has ended (the store is
// closing); items their callers withdrew are dropped.
func TakeLive[T any](stop context.Context, items []T, ctxOf func(T) context.Context, handOf func(T) *Handoff) ([]T, []context.Context) {
	var live []T
	var ctxs []context.Context
	for _, it := range items {
		h := handOf(it)
		err := ctxOf(it).Err()
		if err == nil && stop.Err() != nil {
			err = execstore.ErrClosed
		}
		if err != nil {
			h.Refuse(err)
			continue
		}
		if h.Send() {
			live, ctxs = append(live, it), append(ctxs, ctxOf(it))
		}
	}
	return live, ctxs
}

// AllDone returns a context that ends once every one of ctxs has ended, so that a batch is
// abandoned only when no caller is waiting for it any more, or when stop ends (the store's
// Close gave up). Call release once the batch is done.
func AllDone(stop context.Context, ctxs []context.Context) (ctx context.Context, release func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int64
	left.Store(int64(len(ctxs)))
	stops := make([]func() bool, len(ctxs), len(ctxs)+1)
	for i, c := range ctxs {
		stops[i] = context.AfterFunc(c, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		})
	}
	stops = append(stops, context.AfterFunc(stop, cancel))
	return ctx, func() {
		for _, unregister := range stops {
			unregister()
		}
		cancel()
	}
}

// CallerCause reports err, the outcome of a batch that may have ended because every caller's
// context ended (AllDone), in terms of this caller's context ctx: its error, as it would be for
// an operation of its own.
func CallerCause(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if cerr == nil || !errors.Is(err, context.Canceled) {
		return err
	}
	var unknown *execstore.OutcomeUnknownError
	if errors.As(err, &unknown) {
		u := *unknown
		u.Err = cerr
		return &u
	}
	return cerr
}
