package relay_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/contract"
	"github.com/execstore/execstore/internal/wake"
)

// simBoard is the simulation's wake.Board: every won commit through the memstore marks the
// holders of its execution's partition, as aio's board does for the commits of other
// processes, and every process's relays read it. Its faults: marks dropped (half of them
// with their Seq spent, as a write that failed), late (in order), pushed twice (a hedged
// write applied by both its sends), written to a holder that no longer holds the partition
// (it goes by holdings read up to a second ago), carrying the outbox entries or not, and
// reads that fail. Process p0's commits are also handed over in
// memory: its relays get both.
//
// It also pushes the changes of a holder's record (wake.Follower), as a change stream would:
// at each mark when it becomes visible, and at each Publish. Its faults: a Follow refused, a
// push that ends while the holder runs, changes not pushed.
type simBoard struct {
	plan *simPlan

	mu       sync.Mutex
	holdings map[string]simHolding // by holder
	view     map[string]simHolding // the holdings as last read, at viewAt
	gens     map[string][]simGen   // by holder, the latest two generations the view held
	viewAt   time.Time
	marks    map[string][]simMark // by holder, oldest first, visibleAt never decreasing
	seq      map[string]int64
	follows  map[string][]chan struct{} // the pushes running, by holder
}

type simHolding struct {
	h  wake.Holding
	at time.Time
}

// simGen is a holder's generation as the view first held it, at: the entries of a commit
// begun after it carry it, unless a later one was known before the commit began.
type simGen struct {
	gen int64
	at  time.Time
}

type simMark struct {
	m         wake.Mark
	visibleAt time.Time
}

const (
	simBoardWriter = "engine"
	simBoardKeep   = 64
)

func newSimBoard(plan *simPlan) *simBoard {
	return &simBoard{plan: plan, holdings: map[string]simHolding{}, marks: map[string][]simMark{}, seq: map[string]int64{},
		follows: map[string][]chan struct{}{}}
}

// Follow implements wake.Follower. A push ends with ctx, or, drawn, up to 2s after it began.
func (b *simBoard) Follow(ctx context.Context, holder string) <-chan struct{} {
	ch := make(chan struct{}, 1)
	if b.plan.faulty() && b.plan.chance(0.2) {
		close(ch) // refused, or its aggregate failed
		return ch
	}
	ch <- struct{}{} // open
	b.mu.Lock()
	b.follows[holder] = append(b.follows[holder], ch)
	b.mu.Unlock()
	ended := make(chan struct{})
	if b.plan.faulty() && b.plan.chance(0.3) {
		time.AfterFunc(b.plan.upTo(2*time.Second), func() { b.endFollow(holder, ch, ended) })
	}
	go func() {
		select {
		case <-ctx.Done():
			b.endFollow(holder, ch, ended)
		case <-ended:
		}
	}()
	return ch
}

// endFollow ends the push on ch, once: its channel and ended are closed.
func (b *simBoard) endFollow(holder string, ch chan struct{}, ended chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := slices.Index(b.follows[holder], ch)
	if i < 0 {
		return
	}
	b.follows[holder] = slices.Delete(b.follows[holder], i, i+1)
	close(ch)
	close(ended)
}

// pushChange tells holder's pushes that its record changed, unless the change is not pushed
// (drawn). The caller holds mu.
func (b *simBoard) pushChange(holder string) {
	if b.plan.faulty() && b.plan.chance(0.1) {
		return
	}
	for _, ch := range b.follows[holder] {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

var errSimBoard = errors.New("sim: board read failed")

func (b *simBoard) Publish(_ context.Context, holder string, h wake.Holding) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(h.Parts) == 0 {
		delete(b.holdings, holder)
		return nil
	}
	b.holdings[holder] = simHolding{h: wake.Holding{Kind: h.Kind, Parts: slices.Clone(h.Parts), Ahead: h.Ahead, Gen: h.Gen}, at: time.Now()}
	b.pushChange(holder)
	return nil
}

func (b *simBoard) Marks(_ context.Context, holder string) (map[string][]wake.Mark, error) {
	if b.plan.faulty() && b.plan.chance(0.05) {
		return nil, errSimBoard
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var out []wake.Mark
	for _, sm := range b.marks[holder] {
		if sm.visibleAt.After(now) {
			break
		}
		out = append(out, sm.m)
	}
	if len(out) == 0 {
		return nil, nil
	}
	return map[string][]wake.Mark{simBoardWriter: out}, nil
}

func (b *simBoard) Withdraw(_ context.Context, holder string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.holdings, holder)
	delete(b.marks, holder)
	delete(b.seq, holder)
	return nil
}

// Begin implements wake.Sink: the board marks only won commits; it keeps when the commit
// was about to be sent.
func (b *simBoard) Begin(string) any { return time.Now() }

// End implements wake.Sink: a won commit marks the holders of its partition, as the board
// last read them. The entries a mark carries name the holder's latest Gen the view held
// before the commit began.
func (b *simBoard) End(id string, begun any, c *wake.Committed) {
	if c == nil {
		return
	}
	part := execstore.PartitionOf(id, simParts)
	var fireAt float64
	armed := false
	for _, t := range c.Timers {
		if at := contract.StoredTime(t.FireAt); !t.Cancel && (!armed || at < fireAt) {
			armed, fireAt = true, at
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	if now.Sub(b.viewAt) >= time.Second {
		b.view, b.viewAt = maps.Clone(b.holdings), now
		gens := map[string][]simGen{}
		for holder, h := range b.view {
			known := b.gens[holder]
			if len(known) == 0 || known[len(known)-1].gen < h.h.Gen {
				known = append(known, simGen{gen: h.h.Gen, at: now})
				known = known[max(len(known)-2, 0):]
			}
			gens[holder] = known
		}
		b.gens = gens
	}
	begunAt, _ := begun.(time.Time)
	latest := map[wake.Kind]string{}
	latestAt := map[wake.Kind]time.Time{}
	for holder, h := range b.view {
		if slices.Contains(h.h.Parts, part) && h.at.After(latestAt[h.h.Kind]) {
			latest[h.h.Kind], latestAt[h.h.Kind] = holder, h.at
		}
	}
	for kind, holder := range latest {
		m := wake.Mark{ID: id, Version: c.Version}
		switch {
		case kind == wake.Outbox && len(c.Outbox) > 0:
			if b.plan.chance(0.8) {
				m.Outbox = c.Outbox
				for i := len(b.gens[holder]) - 1; i >= 0; i-- {
					if g := b.gens[holder][i]; g.at.Before(begunAt) {
						m.Gen = g.gen
						break
					}
				}
			}
		case kind == wake.Timers && armed:
			m.FireAt = fireAt
		default:
			continue
		}
		if b.plan.faulty() && b.plan.chance(0.15) {
			if b.plan.chance(0.5) {
				b.seq[holder]++ // a write of marks that failed: its Seq is spent, a gap the holder sees
			}
			continue // lost
		}
		b.seq[holder]++
		m.Seq = b.seq[holder]
		visible := now
		if b.plan.faulty() && b.plan.chance(0.3) {
			visible = now.Add(b.plan.upTo(300 * time.Millisecond))
		}
		if ms := b.marks[holder]; len(ms) > 0 && ms[len(ms)-1].visibleAt.After(visible) {
			visible = ms[len(ms)-1].visibleAt
		}
		ms := append(b.marks[holder], simMark{m: m, visibleAt: visible})
		if b.plan.faulty() && b.plan.chance(0.1) { // a hedged push applied twice, the second copy now or later
			ms = append(ms, simMark{m: m, visibleAt: visible.Add(b.plan.upTo(100 * time.Millisecond))})
		}
		if len(ms) > simBoardKeep {
			ms = ms[len(ms)-simBoardKeep:]
		}
		b.marks[holder] = ms
		if wait := visible.Sub(now); wait > 0 {
			time.AfterFunc(wait, func() {
				b.mu.Lock()
				defer b.mu.Unlock()
				b.pushChange(holder)
			})
		} else {
			b.pushChange(holder)
		}
	}
}
