package wake

import (
	"context"
	"reflect"
	"sync"

	"github.com/execstore/execstore"
)

// Kind is what a holder delivers: a Relay's outbox entries and spawn intents, or a
// Sweeper's due timers.
type Kind string

// The kinds of holders.
const (
	Outbox Kind = "outbox"
	Timers Kind = "timers"
)

// Mark is one wake-up on a Board: a commit of execution ID through a store of another
// process wrote something for the holder. Seq orders the marks of one writer (a store) to
// one holder, from 1. FireAt is the earliest timer the commit armed (contract.StoredTime),
// for a holder of Timers; 0 for one of Outbox. Version is the version the commit created: a
// holder that knows the execution up to it has read what the mark tells of already.
// Outbox is what the commit wrote for a holder of Outbox, when the board carried it (small
// enough): its entries in emit order, every field set as PendingOutbox returns it; nil when
// not carried. Gen, of a mark that carries entries, is a Holding.Gen of the holder that the
// writer had read before the commit was sent (its latest), or 0.
type Mark struct {
	Seq     int64                   `bson:"s"`
	ID      string                  `bson:"i"`
	FireAt  float64                 `bson:"f,omitempty"`
	Version int64                   `bson:"v,omitempty"` // 0 when not known
	Gen     int64                   `bson:"g,omitempty"`
	Outbox  []execstore.OutboxEntry `bson:"-"`
}

// Holding is what a holder publishes on a Board: its kind, the partitions it holds, and how
// far ahead of now a timer's fire time must be for a wake-up to be worth sending (the
// sweeper's scans read that far ahead: a later timer is found by its next poll). Gen is the
// holder's generation: it grows (at least) each time the holder takes a partition, so a
// mark naming a Gen at or after the one a hold of the holder began with is of a commit sent
// while that hold held (Mark.Gen).
type Holding struct {
	Kind  Kind
	Parts []int
	Ahead float64 // seconds; for Timers
	Gen   int64
}

// Board wakes the relays and sweepers of other processes: each holder publishes what it
// holds, the stores of every process write a Mark to the holder of the partition of each
// execution they commit to, and the holder reads its marks by its id at a short interval.
// aio's stores offer one (BoardOf).
//
// What always holds: a board only hastens. A mark that is lost, late, written to a holder
// that no longer holds the partition, or never written (a store that read the holders before
// this one published) delays a delivery until the holder's next poll, which reads the store
// itself. A mark is written only once its commit won, so the entries it carries are the
// commit's as the store holds them; whether they are still pending is the holder's to decide
// (package relay), as for a hand-over. A mark that carries entries names only a Gen of the
// holder that the writer had read before the commit was sent: the holder had published it,
// so the commit was sent after every hold the holder began before drawing it.
type Board interface {
	// Publish records holder's holding, and when it was published: stores read it at most
	// once a second, so a partition taken is woken within a second or so. A holding of no
	// partitions removes the record.
	Publish(ctx context.Context, holder string, h Holding) error
	// Marks returns the marks written to holder, by writer: each writer's latest, oldest
	// first, up to a bound. A holder not published has none.
	Marks(ctx context.Context, holder string) (map[string][]Mark, error)
	// Withdraw removes holder's record.
	Withdraw(ctx context.Context, holder string) error
}

// Follower is a Board that can also tell a holder when its record changed, where the server
// can push (a change stream, on a replica set or a sharded cluster), so that the holder reads
// its marks then rather than at an interval. Follow returns a channel that receives once
// the push is set up, and then after changes of holder's record; it has a buffer of one, so
// many changes may give one receive. The channel is closed when the push ends: the server
// refused it (it has none), a call failed, or ctx ended; Follow may be called again.
//
// A receive only says "read your marks": what a holder takes goes by Marks, as without one.
// A receive lost, late or spurious (the holder's own Publish changes its record too) only
// delays or costs a read.
type Follower interface {
	Board
	Follow(ctx context.Context, holder string) <-chan struct{}
}

// boards holds the boards stores offer, by store.
var boards = struct {
	mu sync.Mutex
	m  map[any]Board
}{m: map[any]Board{}}

// RegisterBoard makes b the board of store, for BoardOf to find; a nil b forgets it. store
// must be comparable (a pointer).
func RegisterBoard(store any, b Board) {
	boards.mu.Lock()
	defer boards.mu.Unlock()
	if b == nil {
		delete(boards.m, store)
		return
	}
	boards.m[store] = b
}

// BoardOf returns the board store registered, or nil (its relays only poll for the commits
// of other processes).
func BoardOf(store any) Board {
	if store == nil || !reflect.ValueOf(store).Comparable() {
		return nil
	}
	boards.mu.Lock()
	defer boards.mu.Unlock()
	return boards.m[store]
}

// Cursor is what a holder has read of its marks: the last Seq of each writer.
type Cursor struct {
	seen map[string]int64
}

// Next returns the marks not read before, and whether some may be missing: a writer's
// fresh mark is past the one after the last it read (the writer wrote more than the board
// keeps between two reads, or a write of marks failed), wherever it stands among the marks
// kept, since a hedged write applied late pushes again Seqs read before. A writer met for
// the first time has all its marks new: a holder's record starts with none.
func (c *Cursor) Next(marks map[string][]Mark) (fresh []Mark, missed bool) {
	if c.seen == nil {
		c.seen = map[string]int64{}
	}
	for w, ms := range marks {
		last := c.seen[w]
		for _, m := range ms {
			if m.Seq <= last { // read before, or pushed again by a hedged write
				continue
			}
			if m.Seq > last+1 {
				missed = true
			}
			fresh = append(fresh, m)
			last = m.Seq
		}
		c.seen[w] = last
	}
	for w := range c.seen {
		if _, ok := marks[w]; !ok {
			delete(c.seen, w) // the writer's marks were removed with the record: it starts again
		}
	}
	return fresh, missed
}

// local holds the holders of this process, by id: a store wakes them through their
// Signal, never through a Board.
var local sync.Map

// HoldLocally records that holder runs in this process, until the returned func is called.
func HoldLocally(holder string) (done func()) {
	local.Store(holder, true)
	return func() { local.Delete(holder) }
}

// Local reports whether holder runs in this process.
func Local(holder string) bool {
	_, ok := local.Load(holder)
	return ok
}
