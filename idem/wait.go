package idem

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v4"

	"github.com/execstore/execstore/internal/idemcheck"
)

// Pauses between Wait's reads: 50ms, doubling, at most 1s.
const (
	waitFirstPause = 50 * time.Millisecond
	waitMaxPause   = time.Second
)

// Wait polls key's record until it is Completed, and returns it. It returns nil when the key
// is absent (never claimed, released, or past its retention), or when timeout passes first.
// It returns ctx's error at once when ctx ends. The reads pause 50ms, then twice as long each
// time, up to 1s. There is no push, since change streams need a replica set.
func (s *Store) Wait(ctx context.Context, key string, timeout time.Duration) (*Record, error) {
	if err := idemcheck.Key(key); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.Multiplier, b.MaxInterval = waitFirstPause, 2, waitMaxPause
	b.RandomizationFactor, b.MaxElapsedTime = 0, 0
	b.Reset()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		rec, err := s.Get(ctx, key)
		if err != nil || rec == nil || rec.State == Completed {
			return rec, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		timer.Reset(min(b.NextBackOff(), left))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		}
	}
}
