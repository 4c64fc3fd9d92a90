package relay

import (
	"hash/maphash"
	"maps"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/execstore/execstore"
)

// itemState is where an item is in its life in a session:
//
//	taken ─┬─> waiting ──> unconfirmed ─┐
//	       └────────────────────────────┴─> queued ──> handling ─┬─> acking ──> out (acked)
//	                                                             └─> failing ─> out (dead, released)
//
// and from any state, out: released (left pending in the store), or cancelled (a commit
// removed it from the store).
type itemState uint8

const (
	out     itemState = iota // not in flight: every entry starts and ends here
	waiting                  // taken ahead of its fire time, it waits for it in memory
	// unconfirmed: its fire time came. A scan sent after it confirms it (queued), or shows
	// that a commit removed it (cancelled).
	unconfirmed
	queued   // in its lane's queue
	handling // in its handler
	acking   // its handler returned nil: its ack waits to be sent, or is in flight
	// failing: its handler failed. The record of its failure waits to be sent, or is in
	// flight; its execution's later items are held back meanwhile.
	failing
	states
)

// entry is an item in a session's flight, and its state.
type entry[T any, K comparable] struct {
	item     T
	key      K
	lane     string // the lane key: the execution whose items are delivered in order
	at       int    // the lane it is queued in or handled by (queued, handling)
	hold     *hold  // the hold it was taken under
	state    itemState
	queuedAt time.Time
	heldAt   time.Time // when its handler was called (handling, acking, failing)
	settleAt time.Time // when it began settling (acking, failing)
	// Of an entry settling (acking, failing):
	fail      *execstore.Failure // the failure to record; nil for an ack
	cause     error              // the handler's error, for OnDead
	tries     int                // failed writes so far
	notBefore time.Time          // when its write may be sent again, after a failed one
}

// flight owns the items a session handed out, from their take to their end, and what it
// remembers of those that ended, under the session's lock. What always holds:
//   - An item is in flight once at most: items holds its one entry, in one state.
//   - set alone changes a state: it keeps count, Stats.InFlight and the holds' inFlight.
//   - soon holds every waiting entry, earliest fire time first; queues[i] every queued entry
//     of lane i, in order; settleQ every settling entry whose write is not in flight.
//     Entries no longer in the state a container is for are skipped there.
//   - failing[lk] is the number of failing entries of lane key lk.
//   - timed[lk] holds the waiting and unconfirmed entries of lane key lk, and nothing else:
//     a commit of an execution looks there alone for the timers it removed (eachTimed).
//   - The entries of lane key lk queued or in a handler are all in one lane, assigned[lk],
//     while there are any (busy[lk] of them); loads[i] counts those of lane i. A lane key
//     with none takes its lane anew when one is queued: the first lane with none from its
//     hashed lane on, else the least loaded. So its handler calls never overlap, and it
//     waits behind another lane key only when it came while no lane was idle.
//   - The epoch counts the scans and the commits begun. Acks, moves to dead and releases
//     are recorded with their epoch while a scan or commit begun at it or before is open.
//
// decide alone says whether an item read by a scan, or a local commit, is handed out.
type flight[T any, K comparable] struct {
	kind    kind[T, K]
	stats   *counters
	onLeave func(h *hold) // called when an entry of h left flight
	seed    maphash.Seed  // routes lane keys to lanes
	retries retries       // the executions waiting for a retry

	items   map[K]*entry[T, K]
	count   [states]int
	soon    []*entry[T, K]
	queues  [][]*entry[T, K]
	settleQ []*entry[T, K]
	failing map[string]int
	timed   map[string]map[*entry[T, K]]struct{}
	// The lanes of the lane keys with entries queued or in a handler (see above).
	assigned map[string]int
	busy     map[string]int
	loads    []int

	epoch    uint64
	acked    map[K]uint64      // the items acked or moved to dead, with their epoch
	dead     map[K]bool        // of those, the ones moved to dead
	fence    map[string]uint64 // by lane key, the epoch an item of it was last released at
	open     map[uint64]int    // by epoch, the scans and commits begun then and open
	heldBack int               // the items the last scan held back for their execution
	// floor is the epoch the last prune kept everything from: finish, by each scan and each
	// local commit, walks the records only once the oldest open epoch passed it.
	floor uint64
}

func newFlight[T any, K comparable](k kind[T, K], stats *counters, lanes int, rt retries, onLeave func(*hold)) *flight[T, K] {
	return &flight[T, K]{kind: k, stats: stats, onLeave: onLeave, seed: maphash.MakeSeed(), retries: rt,
		items: map[K]*entry[T, K]{}, queues: make([][]*entry[T, K], lanes), failing: map[string]int{},
		timed:    map[string]map[*entry[T, K]]struct{}{},
		assigned: map[string]int{}, busy: map[string]int{}, loads: make([]int, lanes),
		acked: map[K]uint64{}, dead: map[K]bool{}, fence: map[string]uint64{}, open: map[uint64]int{}}
}

// set moves e to state to: the one place the counts change.
func (f *flight[T, K]) set(e *entry[T, K], to itemState) {
	from := e.state
	if from == out {
		f.items[e.key] = e
		e.hold.inFlight++
		f.stats.inFlight.Add(1)
	} else {
		f.count[from]--
	}
	if to == out {
		delete(f.items, e.key)
		e.hold.inFlight--
		f.stats.inFlight.Add(-1)
	} else {
		f.count[to]++
	}
	if from == failing {
		if f.failing[e.lane]--; f.failing[e.lane] <= 0 {
			delete(f.failing, e.lane)
		}
	}
	if to == failing {
		f.failing[e.lane]++
	}
	if isTimed(from) && !isTimed(to) {
		if delete(f.timed[e.lane], e); len(f.timed[e.lane]) == 0 {
			delete(f.timed, e.lane)
		}
	}
	if !isTimed(from) && isTimed(to) {
		if f.timed[e.lane] == nil {
			f.timed[e.lane] = map[*entry[T, K]]struct{}{}
		}
		f.timed[e.lane][e] = struct{}{}
	}
	if (from == queued || from == handling) && to != queued && to != handling {
		f.loads[e.at]--
		if f.busy[e.lane]--; f.busy[e.lane] <= 0 {
			delete(f.busy, e.lane)
			delete(f.assigned, e.lane)
		}
	}
	e.state = to
	if to == out {
		f.onLeave(e.hold)
	}
}

// take records item as in flight under h: waiting when its fire time is after asOf, when
// the store was read (by Options.Clock), else queued.
func (f *flight[T, K]) take(h *hold, item T, asOf, now time.Time) *entry[T, K] {
	e := &entry[T, K]{item: item, key: f.kind.key(item), lane: f.kind.lane(item), hold: h}
	if at := f.kind.dueAt(item); !at.IsZero() && at.After(asOf) {
		f.set(e, waiting)
		f.trimSoon()
		i := sort.Search(len(f.soon), func(i int) bool { return f.kind.dueAt(f.soon[i].item).After(at) })
		f.soon = slices.Insert(f.soon, i, e)
		return e
	}
	f.queue(e, now)
	return e
}

// assign returns the lane of lane key lk, for one more of its entries queued: its lane while
// it has entries queued or in a handler, else the first lane with none from its hashed lane
// on, else the least loaded.
func (f *flight[T, K]) assign(lk string) int {
	i, ok := f.assigned[lk]
	if !ok {
		n := len(f.loads)
		start := int(maphash.String(f.seed, lk) % uint64(n))
		i = start
		for j := range n {
			k := (start + j) % n
			if f.loads[k] == 0 {
				i = k
				break
			}
			if f.loads[k] < f.loads[i] {
				i = k
			}
		}
		f.assigned[lk] = i
	}
	f.busy[lk]++
	f.loads[i]++
	return i
}

// lanesBusy reports whether every lane has an entry queued or in its handler.
func (f *flight[T, K]) lanesBusy() bool { return !slices.Contains(f.loads, 0) }

// held reports whether e's handler was called: it is in the handler, or settling.
func (e *entry[T, K]) held() bool {
	return e.state == handling || e.state == acking || e.state == failing
}

// queue queues e, out of a lane (taken, or unconfirmed), in its lane key's lane.
func (f *flight[T, K]) queue(e *entry[T, K], now time.Time) {
	e.at = f.assign(e.lane)
	f.set(e, queued)
	e.queuedAt = now
	f.queues[e.at] = append(f.queues[e.at], e)
}

// pop takes the first queued entry of lane i to its handler, if any.
func (f *flight[T, K]) pop(i int) *entry[T, K] {
	for len(f.queues[i]) > 0 {
		e := f.queues[i][0]
		f.queues[i][0] = nil
		f.queues[i] = f.queues[i][1:]
		if e.state == queued {
			f.set(e, handling)
			e.heldAt = time.Now()
			return e
		}
	}
	f.queues[i] = nil
	return nil
}

// trimSoon drops the entries no longer waiting from the head of soon.
func (f *flight[T, K]) trimSoon() {
	for len(f.soon) > 0 && f.soon[0].state != waiting {
		f.soon[0] = nil
		f.soon = f.soon[1:]
	}
}

// nextFire is the earliest fire time waiting, zero for none.
func (f *flight[T, K]) nextFire() time.Time {
	f.trimSoon()
	if len(f.soon) == 0 {
		return time.Time{}
	}
	return f.kind.dueAt(f.soon[0].item)
}

// fire moves the waiting entries due by now to unconfirmed, and returns them.
func (f *flight[T, K]) fire(now time.Time) []*entry[T, K] {
	var due []*entry[T, K]
	for f.trimSoon(); len(f.soon) > 0 && !f.kind.dueAt(f.soon[0].item).After(now); f.trimSoon() {
		e := f.soon[0]
		f.set(e, unconfirmed)
		due = append(due, e)
	}
	return due
}

// settle queues e's write: its ack (fail nil), or its failure's record.
func (f *flight[T, K]) settle(e *entry[T, K], fail *execstore.Failure, cause error) {
	e.fail, e.cause = fail, cause
	e.settleAt = time.Now()
	if fail == nil {
		f.set(e, acking)
	} else {
		f.set(e, failing)
	}
	f.settleQ = append(f.settleQ, e)
}

// settling is the number of entries settling: their write waits, or is in flight.
func (f *flight[T, K]) settling() int { return f.count[acking] + f.count[failing] }

// release takes e out of flight, pending still. Its lane is fenced, since the scans begun
// before may have skipped it as in flight, and its source soiled (sources.go).
func (f *flight[T, K]) release(e *entry[T, K]) {
	f.fence[e.lane] = f.epoch
	e.hold.sources.soil(f.kind.source(e.item), f.epoch)
	f.set(e, out)
}

// ack takes e out of flight, acked: no scan or commit begun before hands it out again.
func (f *flight[T, K]) ack(e *entry[T, K]) {
	f.acked[e.key] = f.epoch
	delete(f.dead, e.key)
	f.set(e, out)
}

// bury takes e out of flight, moved to dead: acked, marked dead since a revive may make it
// pending again unseen (decide), and its source soiled.
func (f *flight[T, K]) bury(e *entry[T, K]) {
	f.ack(e)
	f.dead[e.key] = true
	e.hold.sources.soil(f.kind.source(e.item), f.epoch)
}

// cancel takes e out of flight: a commit removed it (a timer cancelled or re-armed).
func (f *flight[T, K]) cancel(e *entry[T, K]) {
	f.set(e, out)
	f.stats.cancelled.Add(1)
}

// begin opens an epoch, for a scan or a commit about to be sent. finish closes it.
func (f *flight[T, K]) begin() uint64 {
	f.epoch++
	f.open[f.epoch]++
	return f.epoch
}

// finish closes epoch n, and forgets the records no open epoch needs.
func (f *flight[T, K]) finish(n uint64) {
	if f.open[n]--; f.open[n] <= 0 {
		delete(f.open, n)
	}
	oldest := uint64(math.MaxUint64)
	for at := range f.open {
		oldest = min(oldest, at)
	}
	if oldest <= f.floor {
		return // every record is at floor or later: none is below oldest
	}
	f.floor = min(oldest, f.epoch)
	for k, at := range f.acked {
		if at < oldest {
			delete(f.acked, k)
			delete(f.dead, k)
		}
	}
	maps.DeleteFunc(f.fence, func(_ string, at uint64) bool { return at < oldest })
}

// verdict is what decide says of an item.
type verdict int

const (
	hand     verdict = iota // take it
	skip                    // in flight, or acked since: handed out already
	skipDead                // moved to dead since, and maybe revived since: skipped, its execution fenced
	holdBack                // its execution waits: it is left in the store, for a later scan
)

// decide is the rule for item key, of lane key lk, read by a scan or written by a local
// commit begun at epoch n: skipped when in flight or acked since n; held back while its
// execution waits (a retry, a failure's record) or an item of it released since n comes
// first; skipped when moved to dead since n, fencing its execution, since the scan may have
// read it revived. The caller checks the hold, and a commit's sources (mayHandOver).
func (f *flight[T, K]) decide(key K, lk string, n uint64, now time.Time) verdict {
	if f.items[key] != nil {
		return skip
	}
	if at, ok := f.acked[key]; ok && at >= n {
		if f.dead[key] {
			f.fence[lk] = max(f.fence[lk], n)
			return skipDead
		}
		return skip
	}
	if f.waits(lk, now) || f.fence[lk] >= n {
		return holdBack
	}
	return hand
}

// waits reports whether execution lk's items are held back at now: for a retry, or a
// failure's record.
func (f *flight[T, K]) waits(lk string, now time.Time) bool {
	return f.failing[lk] > 0 || f.retries.holds(lk, now)
}

// isTimed reports whether s is a state of an entry waiting on its fire time or its
// confirmation: waiting or unconfirmed.
func isTimed(s itemState) bool { return s == waiting || s == unconfirmed }

// eachTimed calls fn with the waiting and unconfirmed entries of lane key lk. fn may move
// them on.
func (f *flight[T, K]) eachTimed(lk string, fn func(e *entry[T, K])) {
	for e := range f.timed[lk] {
		fn(e)
	}
}

// each calls fn with the entries in state s.
func (f *flight[T, K]) each(s itemState, fn func(e *entry[T, K])) {
	for _, e := range f.items {
		if e.state == s {
			fn(e)
		}
	}
}
