package relay

import (
	"context"
	"time"
)

// repeat calls f after first, then next after each call returns, until stop is closed or
// the session ends. f's context ends with them: a slow server never holds up the stop.
func (s *session[T, K]) repeat(stop <-chan struct{}, first, next time.Duration, f func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(s.sessionCtx)
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	t := time.NewTimer(first)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f(ctx)
		t.Reset(next)
	}
}
