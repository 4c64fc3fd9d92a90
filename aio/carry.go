package aio

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/opsrun"
)

// defaultAckWait is how long an ack waits, by default, for its source's next commit to carry
// it (Options.AckWait).
const defaultAckWait = 100 * time.Millisecond

// carriedAck is an AckOutbox call waiting for its source execution's next commit through the
// store, which removes the entry in its own write. It is resolved once: by a commit that won
// while carrying it (the entry is gone, by that write), or by the ack's own write, sent when
// the wait ran out, when the commit that took it lost or may not have been applied, or when
// the store closes.
type carriedAck struct {
	ctx    context.Context // the caller's: the ack's own write is sent with it
	source string
	seq    int64
	timer  *time.Timer
	state  ackState // guarded by the carrier's mu
	done   chan struct{}
	err    error // set before done closes
}

type ackState int

const (
	ackWaiting ackState = iota // in the carrier, for a commit of its source to take
	ackTaken                   // in a commit in flight
	ackSending                 // its own write is sent
	ackDone
)

// committingRecently is how recent a store's last commit must be for its acks to wait for
// one: a store that serves only relays sends them at once.
const committingRecently = time.Second

// ackCarrier holds the acks waiting for a commit of their source, by source execution id.
type ackCarrier struct {
	s          *Store
	wait       time.Duration
	lastCommit atomic.Int64 // unix nanoseconds of the store's last commit sent
	mu         sync.Mutex
	waiting    map[string][]*carriedAck
	closed     bool // Close began: acks go out alone at once
}

func newAckCarrier(s *Store, wait time.Duration) *ackCarrier {
	return &ackCarrier{s: s, wait: wait, waiting: map[string][]*carriedAck{}}
}

// ack acks outbox entry seq of source: carried by source's next commit through the store if
// one takes it within the wait, else written alone. It returns once the entry is removed, or
// with the error of the write that would have removed it. A caller whose ctx ends while the
// ack waits gets ctx's error, and nothing is written; once a commit took it, an error matching
// execstore.ErrOutcomeUnknown.
func (c *ackCarrier) ack(ctx context.Context, source string, seq int64) error {
	if time.Since(time.Unix(0, c.lastCommit.Load())) > committingRecently {
		return c.s.ackAlone(ctx, source, seq)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return c.s.ackAlone(ctx, source, seq)
	}
	a := &carriedAck{ctx: ctx, source: source, seq: seq, done: make(chan struct{})}
	c.waiting[source] = append(c.waiting[source], a)
	a.timer = time.AfterFunc(c.wait, func() { c.sendAlone(a, ackWaiting) })
	c.mu.Unlock()
	select {
	case <-a.done:
		return a.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	state := a.state
	if state == ackWaiting {
		c.remove(a)
		a.state = ackDone
	}
	c.mu.Unlock()
	if state == ackWaiting {
		a.timer.Stop()
		return ctx.Err() // never sent
	}
	select {
	case <-a.done: // its write, or the commit's outcome, may already be known
		return a.err
	default:
		return &execstore.OutcomeUnknownError{Op: "ack", ExecutionID: source, Err: ctx.Err()}
	}
}

// take hands the acks waiting for source to a commit of it, which carries them. The commit
// resolves each with carried (its write won) or dropped (it did not, or may not have).
func (c *ackCarrier) take(source string) []*carriedAck {
	if c == nil {
		return nil
	}
	c.lastCommit.Store(time.Now().UnixNano())
	c.mu.Lock()
	defer c.mu.Unlock()
	acks := c.waiting[source]
	if len(acks) == 0 {
		return nil
	}
	delete(c.waiting, source)
	for _, a := range acks {
		a.state = ackTaken
		a.timer.Stop()
	}
	return acks
}

// seqs returns the seqs of acks.
func seqsOf(acks []*carriedAck) []int64 {
	if len(acks) == 0 {
		return nil
	}
	seqs := make([]int64, len(acks))
	for i, a := range acks {
		seqs[i] = a.seq
	}
	return seqs
}

// carried resolves acks taken by a commit that won: their entries are gone with its write.
func (c *ackCarrier) carried(acks []*carriedAck) {
	if c == nil || len(acks) == 0 {
		return
	}
	c.mu.Lock()
	var won []*carriedAck
	for _, a := range acks {
		if a.state == ackTaken {
			a.state = ackDone
			won = append(won, a)
		}
	}
	c.mu.Unlock()
	c.s.stats.acksCarried.Add(int64(len(won)))
	for _, a := range won {
		close(a.done)
	}
}

// dropped resolves acks taken by a commit that lost, was refused, or may not have been
// applied: each is written alone.
func (c *ackCarrier) dropped(acks []*carriedAck) {
	if c == nil {
		return
	}
	for _, a := range acks {
		c.sendAlone(a, ackTaken)
	}
}

// sendAlone writes a alone, if it is still in state from: its wait ran out (ackWaiting), or
// the commit that took it did not carry it (ackTaken).
func (c *ackCarrier) sendAlone(a *carriedAck, from ackState) {
	c.mu.Lock()
	if a.state != from {
		c.mu.Unlock()
		return
	}
	if from == ackWaiting {
		c.remove(a)
	}
	a.state = ackSending
	c.mu.Unlock()
	fut := c.s.ackAloneAsync(a.ctx, a.source, a.seq)
	go func() {
		_, a.err = fut.Wait(a.ctx)
		c.mu.Lock()
		a.state = ackDone
		c.mu.Unlock()
		close(a.done)
	}()
}

// flush makes every waiting ack go out alone, and every later one at once: the store is
// closing. The writes are submitted before flush returns, so that Close waits for them.
func (c *ackCarrier) flush() {
	c.mu.Lock()
	c.closed = true
	var all []*carriedAck
	for _, acks := range c.waiting {
		all = append(all, acks...)
	}
	c.mu.Unlock()
	for _, a := range all {
		a.timer.Stop()
		c.sendAlone(a, ackWaiting)
	}
}

// remove takes a out of the waiting acks of its source. The caller holds mu.
func (c *ackCarrier) remove(a *carriedAck) {
	acks := c.waiting[a.source]
	for i, w := range acks {
		if w == a {
			acks = append(acks[:i], acks[i+1:]...)
			break
		}
	}
	if len(acks) == 0 {
		delete(c.waiting, a.source)
	} else {
		c.waiting[a.source] = acks
	}
}

// ackAlone writes the ack of outbox entry seq of source as its own write (coalesced with
// other acks where coalescing is on).
func (s *Store) ackAlone(ctx context.Context, source string, seq int64) error {
	_, err := s.ackAloneAsync(ctx, source, seq).Wait(ctx)
	return err
}

func (s *Store) ackAloneAsync(ctx context.Context, source string, seq int64) *Future[struct{}] {
	return s.idempotentWriteAsync(ctx, opAckOutbox, opsrun.OutboxAckWrite(source, seq))
}
