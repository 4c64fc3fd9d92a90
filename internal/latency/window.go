// Package latency keeps the latest latencies of one kind of call and gives their median: a
// figure one slow answer does not move, and a server slow for a while does.
//
// What always holds: Window.Median is the median of the last Window.Size latencies
// observed (all of them when fewer came), and is known only once Window.Min came.
package latency

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// The defaults of Window's fields.
const (
	DefaultSize = 32
	DefaultMin  = 8
)

// Window is the latest latencies of one kind of call. Its zero value is ready: the median of
// the last DefaultSize, known once DefaultMin came. It is safe for concurrent use; Size and
// Min are set before the first Observe.
type Window struct {
	Size int // how many of the latest latencies the median is taken over; 0 for DefaultSize
	Min  int // how many must have come for a median; 0 for DefaultMin, at most Size

	mu     sync.Mutex
	recent []time.Duration // a ring
	n      int             // latencies observed, all time
}

// Observe records latency d.
func (w *Window) Observe(d time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.recent == nil {
		w.recent = make([]time.Duration, cmp.Or(max(w.Size, 0), DefaultSize))
	}
	w.recent[w.n%len(w.recent)] = d
	w.n++
}

// Median returns the median of the latest latencies (of an even number, the upper of the
// two middle ones), and whether enough came for one.
func (w *Window) Median() (time.Duration, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	size := len(w.recent) // as Observe made it: Size read at the first
	if w.n == 0 || w.n < min(cmp.Or(max(w.Min, 0), DefaultMin), size) {
		return 0, false
	}
	s := slices.Clone(w.recent[:min(w.n, size)])
	slices.Sort(s)
	return s[len(s)/2], true
}
