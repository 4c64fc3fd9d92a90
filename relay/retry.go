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
	// owed is set when the key failed, or a scan held its items back: a scan is owed at
	// until, even when until has passed by the time the dispatcher looks.
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
	st.owed = true // its items are back in the store: a scan at until finds them
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

// heldBack records that a scan held items of key back for its retry: next asks for a scan
// at the retry time, or at once when that time has passed, until a scan is sent after it.
func (r *retries) heldBack(key string) {
	if st := r.keys[key]; st != nil {
		st.owed = true
	}
}

// scanning records that a scan is sent at now: it is the scan owed for the keys past their
// retry time.
func (r *retries) scanning(now time.Time) {
	for _, st := range r.keys {
		if st.owed && !st.until.After(now) {
			st.owed = false
		}
	}
}

// next returns the earliest retry time after now, or now itself when a key whose items a
// scan held back is past its retry time, if any. It forgets the keys whose retry time is
// more than the longest back-off past: their items were retried, or are gone.
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
