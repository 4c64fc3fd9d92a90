package relay

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// newBackoff returns an exponential back-off from lo to hi, doubling, with ±20% jitter, that
// never gives up.
func newBackoff(lo, hi time.Duration) *backoff.ExponentialBackOff {
	b := &backoff.ExponentialBackOff{
		InitialInterval:     lo,
		RandomizationFactor: 0.2,
		Multiplier:          2,
		MaxInterval:         hi,
		MaxElapsedTime:      0,
		Stop:                backoff.Stop,
		Clock:               backoff.SystemClock,
	}
	b.Reset()
	return b
}

// retries is the back-off of the lane keys (executions) whose last delivery failed: their
// items are held back until the key's retry time, so that one execution's items keep their
// order and a failing execution does not hold up the others of its lane.
type retries struct {
	lo, hi time.Duration
	keys   map[string]*retryState
}

type retryState struct {
	b     *backoff.ExponentialBackOff
	until time.Time
}

func newRetries(lo, hi time.Duration) retries {
	return retries{lo: lo, hi: hi, keys: map[string]*retryState{}}
}

// failed holds key back for its next back-off from now.
func (r *retries) failed(key string, now time.Time) {
	st := r.keys[key]
	if st == nil {
		st = &retryState{b: newBackoff(r.lo, r.hi)}
		r.keys[key] = st
	}
	st.until = now.Add(st.b.NextBackOff())
}

// succeeded forgets key's back-off.
func (r *retries) succeeded(key string) {
	if len(r.keys) > 0 {
		delete(r.keys, key)
	}
}

// holds reports whether key is held back at now.
func (r *retries) holds(key string, now time.Time) bool {
	st := r.keys[key]
	return st != nil && now.Before(st.until)
}

// next returns the earliest retry time after now, if any. It forgets the keys whose retry
// time is more than the longest back-off past: their items were retried, or are gone.
func (r *retries) next(now time.Time) (time.Time, bool) {
	var first time.Time
	for k, st := range r.keys {
		switch {
		case st.until.After(now):
			if first.IsZero() || st.until.Before(first) {
				first = st.until
			}
		case now.Sub(st.until) > r.hi:
			delete(r.keys, k)
		}
	}
	return first, !first.IsZero()
}
