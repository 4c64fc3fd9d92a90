package relay

import (
	"time"

	"github.com/cenkalti/backoff/v4"
)

// newBackoff returns a back-off from lo to hi, doubling, with ±20% jitter, that never gives
// up.
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

// retries holds back the items of the executions whose last delivery failed until their
// retry time: their items keep their order, and hold up no other execution.
type retries struct {
	lo, hi time.Duration
	keys   map[string]*retryState
}

type retryState struct {
	b     *backoff.ExponentialBackOff
	until time.Time
	// owed: the key failed, or a scan held its items back. A scan is owed at until, even when
	// until has passed by the time the dispatcher looks.
	owed bool
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
	st.owed = true
}

// succeeded forgets key's back-off.
func (r *retries) succeeded(key string) { delete(r.keys, key) }

// holds reports whether key is held back at now.
func (r *retries) holds(key string, now time.Time) bool {
	st := r.keys[key]
	return st != nil && now.Before(st.until)
}

// heldBack records that a scan held items of key back for its retry: a scan is owed.
func (r *retries) heldBack(key string) {
	if st := r.keys[key]; st != nil {
		st.owed = true
	}
}

// scanning records that a scan is sent at now: the one owed by the keys past their retry
// time.
func (r *retries) scanning(now time.Time) {
	for _, st := range r.keys {
		if st.owed && !st.until.After(now) {
			st.owed = false
		}
	}
}

// next returns the earliest retry time after now, or now when a scan is owed for a key past
// its retry time. It forgets the keys past theirs by more than the longest back-off.
func (r *retries) next(now time.Time) (time.Time, bool) {
	var first time.Time
	for k, st := range r.keys {
		switch {
		case st.until.After(now):
			if first.IsZero() || st.until.Before(first) {
				first = st.until
			}
		case st.owed:
			first = now
		case now.Sub(st.until) > r.hi:
			delete(r.keys, k)
		}
	}
	return first, !first.IsZero()
}
