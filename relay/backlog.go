package relay

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/execstore/execstore/internal/telemetry"
)

// Backlog is what a Relay's or a Sweeper's last scan of one partition it holds found waiting
// there, kept from the scan's answer (a targeted read does not change it), and the
// partition's dead items as last counted (Options.DeadCountInterval).
type Backlog struct {
	Partition int
	Holder    string    // the relay's member name (Member): the partition's lease holder
	ScannedAt time.Time // when the scan was sent, by Options.Clock; zero: counted, not scanned yet
	// Items are the entries (a Relay) or the timers due at ScannedAt (a Sweeper) that the
	// scan returned, and a Relay's entries in flight, at the scan's answer, of the sources
	// it left out (see the package doc). AtLeast: the scan stopped at its limit, and there
	// may be more.
	Items   int
	AtLeast bool
	// Oldest is when the oldest of Items began to wait: an entry's CommittedAt, by its
	// committer's clock (zero when no entry records it), or a timer's FireAt.
	Oldest time.Time
	// Dead is the number of dead items of the partition, of every kind, as counted at
	// DeadCountedAt (by Options.Clock; zero when not counted yet), plus those the runner
	// moved to dead since (one it moves while a count is in flight may be missed until the
	// next count). A store that is not an execstore.DeadCounting is never counted.
	Dead          int64
	DeadCountedAt time.Time
}

// Age is how long the oldest item has waited at now: 0 when none waits, when it is not
// known, or when the committer's clock is ahead. It grows between scans: an age that keeps
// growing tells of an oldest item not delivered, or a partition no longer scanned.
func (b Backlog) Age(now time.Time) time.Duration {
	if b.Items == 0 || b.Oldest.IsZero() {
		return 0
	}
	return max(now.Sub(b.Oldest), 0)
}

// backlogBook keeps the Backlog of each partition a runner holds.
type backlogBook struct {
	holder string // the runner's member name
	mu     sync.Mutex
	parts  map[int]Backlog
	dead   map[int]deadCount
}

// deadCount is a partition's dead items: n at at, by Options.Clock.
type deadCount struct {
	n  int64
	at time.Time
}

func (b *backlogBook) record(bl Backlog) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.parts == nil {
		b.parts = map[int]Backlog{}
	}
	b.parts[bl.Partition] = bl
}

// counted records the dead items of parts counted at at: n[p] in p (none when absent), for
// the partitions still held.
func (b *backlogBook) counted(parts []int, n map[int]int64, at time.Time, held func(p int) bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dead == nil {
		b.dead = map[int]deadCount{}
	}
	for _, p := range parts {
		if held(p) {
			b.dead[p] = deadCount{n: n[p], at: at}
		}
	}
}

// movedToDead counts one item of partition p moved to dead since its last count.
func (b *backlogBook) movedToDead(p int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if d, ok := b.dead[p]; ok {
		d.n++
		b.dead[p] = d
	}
}

// countedAt is when p's dead items were last counted, zero if never.
func (b *backlogBook) countedAt(p int) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.dead[p].at
}

// drop forgets partition p, no longer held.
func (b *backlogBook) drop(p int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.parts, p)
	delete(b.dead, p)
}

// clear forgets every partition, at the session's end.
func (b *backlogBook) clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.parts, b.dead = nil, nil
}

// all returns the backlogs of the partitions scanned or counted, in partition order.
func (b *backlogBook) all() []Backlog {
	b.mu.Lock()
	defer b.mu.Unlock()
	rows := map[int]Backlog{}
	maps.Copy(rows, b.parts)
	for p, d := range b.dead {
		bl, ok := rows[p]
		if !ok {
			bl = Backlog{Partition: p, Holder: b.holder}
		}
		bl.Dead, bl.DeadCountedAt = d.n, d.at
		rows[p] = bl
	}
	out := make([]Backlog, 0, len(rows))
	for _, p := range slices.Sorted(maps.Keys(rows)) {
		out = append(out, rows[p])
	}
	return out
}

// backlogPoints is the book as the telemetry's gauges report it.
func (r *runner[T, K]) backlogPoints() []telemetry.BacklogPoint {
	all := r.book.all()
	now := r.opts.Clock()
	out := make([]telemetry.BacklogPoint, len(all))
	for i, b := range all {
		out[i] = telemetry.BacklogPoint{Partition: b.Partition, Holder: b.Holder, Scanned: !b.ScannedAt.IsZero(),
			Items: int64(b.Items), AtLeast: b.AtLeast, Age: -1, Dead: -1}
		if b.Items == 0 || !b.Oldest.IsZero() { // known: none waits, or when the oldest began
			out[i].Age = b.Age(now)
		}
		if !b.DeadCountedAt.IsZero() {
			out[i].Dead = b.Dead
		}
	}
	return out
}
