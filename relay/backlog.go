package relay

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/execstore/execstore/internal/telemetry"
)

// Backlog is what a Relay's or a Sweeper's last scan of one partition it holds found waiting
// there: the pending outbox entries, or the due timers, and how long the oldest has waited.
// It costs no command of its own: it is the scan's answer, kept. A targeted read (of named
// executions) does not change it.
type Backlog struct {
	Partition int
	Holder    string    // the relay's member name (Stats.Member): the partition's lease holder
	ScannedAt time.Time // when the scan was sent, by Options.Clock
	// Items are the entries (a Relay) or the timers due at ScannedAt (a Sweeper) that the
	// scan returned. AtLeast: the scan stopped at its limit, and there may be more.
	Items   int
	AtLeast bool
	// Oldest is when the oldest of Items began to wait: an entry's CommittedAt, by its
	// committer's clock (zero when no entry records it), or a timer's FireAt.
	Oldest time.Time
}

// Age is how long the oldest item has waited at now, if it still waits: 0 when none waited
// or it is not known when the oldest began, or when the committer's clock is ahead of now's
// by more. Between scans it grows with now, so an age that keeps growing tells of a
// partition whose oldest item is not delivered, or that is no longer scanned.
func (b Backlog) Age(now time.Time) time.Duration {
	if b.Items == 0 || b.Oldest.IsZero() {
		return 0
	}
	return max(now.Sub(b.Oldest), 0)
}

// backlogBook keeps the Backlog of each partition a runner holds, as its last scan of it
// found it.
type backlogBook struct {
	mu    sync.Mutex
	parts map[int]Backlog
}

func (b *backlogBook) record(bl Backlog) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.parts == nil {
		b.parts = map[int]Backlog{}
	}
	b.parts[bl.Partition] = bl
}

// drop forgets partition p: the runner no longer holds it.
func (b *backlogBook) drop(p int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.parts, p)
}

// clear forgets every partition: the session ended.
func (b *backlogBook) clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.parts = nil
}

// all returns the partitions' backlogs in partition order.
func (b *backlogBook) all() []Backlog {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Backlog, 0, len(b.parts))
	for _, p := range slices.Sorted(maps.Keys(b.parts)) {
		out = append(out, b.parts[p])
	}
	return out
}

// backlogPoints is the book as the telemetry's gauges report it.
func (r *runner[T, K]) backlogPoints() []telemetry.BacklogPoint {
	all := r.book.all()
	now := r.opts.Clock()
	out := make([]telemetry.BacklogPoint, len(all))
	for i, b := range all {
		out[i] = telemetry.BacklogPoint{Partition: b.Partition, Holder: b.Holder, Items: int64(b.Items), AtLeast: b.AtLeast, Age: -1}
		if b.Items == 0 || !b.Oldest.IsZero() { // known: none waits, or when the oldest began
			out[i].Age = b.Age(now)
		}
	}
	return out
}
