package aio

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/internal/async"
	"github.com/execstore/execstore/internal/opsrun"
)

// defaultAckWait is how long an ack waits, by default, for its source's next commit to carry
// it (Options.AckWait). At 64 handlers on 64 executions (the bench on DocumentDB), 100ms
// left 15–42% of the acks to go alone, 300ms 10–14%.
const defaultAckWait = 300 * time.Millisecond

// carriedAck is an AckOutbox call, or one timer of a DeleteTimers call, waiting for its
// source execution's next commit through the store, which removes the entry or timer in its
// own write. It is resolved once: by a commit that won while carrying it (the entry or timer
// is gone, by that write), or by its own write, sent when the wait ran out, when the commit
// that took it lost or may not have been applied, or when the store closes.
type carriedAck struct {
	ctx    context.Context // the caller's: the ack's own write is sent with it
	source string
	seq    int64               // the outbox entry's, when fired is nil
	fired  *execstore.DueTimer // the timer to delete; nil for an outbox entry
	call   *time.Timer         // its call's wait (shared by the timers of one DeleteTimers)
	state  ackState            // guarded by the carrier's mu
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
	if !c.committing() {
		return c.s.ackAlone(ctx, source, seq)
	}
	err, ok := c.await(ctx, []*carriedAck{{ctx: ctx, source: source, seq: seq}})
	if !ok {
		return c.s.ackAlone(ctx, source, seq)
	}
	return err
}

// deleteTimers deletes timers, each only while it still fires at its FireAt: carried by the
// next commit of its execution through the store if one takes it within the wait, else
// written alone. A commit that re-arms or cancels a timer's path removes the timer with its
// own operation. It returns as ack does, with the errors of every timer joined.
func (c *ackCarrier) deleteTimers(ctx context.Context, timers []execstore.DueTimer) error {
	if !c.committing() {
		return c.s.deleteTimersAlone(ctx, timers)
	}
	items := make([]*carriedAck, len(timers))
	for i := range timers {
		t := timers[i] // the carrier keeps its own copy: the caller may reuse its slice
		items[i] = &carriedAck{ctx: ctx, source: t.ExecutionID, fired: &t}
	}
	err, ok := c.await(ctx, items)
	if !ok {
		return c.s.deleteTimersAlone(ctx, timers)
	}
	return err
}

// sending records that the store sends a commit now.
func (c *ackCarrier) sending() {
	if c != nil {
		c.lastCommit.Store(time.Now().UnixNano())
	}
}

// committing reports whether the store sent a commit recently, or holds one in its group
// commit: otherwise nothing waits for one.
func (c *ackCarrier) committing() bool {
	return time.Since(time.Unix(0, c.lastCommit.Load())) <= committingRecently || c.grouping()
}

// grouping reports whether the store's group commit holds commits, waiting or in flight.
func (c *ackCarrier) grouping() bool { return c.s.group != nil && c.s.group.Busy() }

// await makes items wait for a commit of their sources, and returns once each is resolved,
// with their errors joined; ok is false, and nothing waits, when the store is closing. A
// caller whose ctx ends while every item still waits gets ctx's error, and nothing is
// written; once one was taken by a commit or sent, an error matching
// execstore.ErrOutcomeUnknown.
func (c *ackCarrier) await(ctx context.Context, items []*carriedAck) (err error, ok bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, false
	}
	// One wait for the call: what is still waiting when it runs out, or once the store has
	// sent no commit for idleAfter, goes out together.
	start := time.Now()
	var call *time.Timer
	call = time.AfterFunc(c.nextLook(start, start), func() {
		c.mu.Lock() // call is set under mu, which may still be held here
		t := call
		c.mu.Unlock()
		c.look(items, t, start)
	})
	for _, a := range items {
		a.done, a.call = make(chan struct{}), call
		c.waiting[a.source] = append(c.waiting[a.source], a)
	}
	c.mu.Unlock()
	var errs []error
	for i, a := range items {
		select {
		case <-a.done:
			errs = append(errs, a.err)
			continue
		case <-ctx.Done():
		}
		err := c.abandon(ctx, items[i:], len(errs) > 0)
		if len(errs) > 0 { // the errors of those resolved already stand too
			err = errors.Join(append(errs, err)...)
		}
		return err, true
	}
	return errors.Join(errs...), true
}

// idleAfter is how long a store that sends no commit makes its acks wait: a tenth of the
// wait, at least a millisecond. Under a stream of commits an ack waits up to the whole wait
// for its source's; once commits stop (the engine is idle, or a run ends), no commit is
// coming, and the acks go out. A store whose group commit holds commits, waiting or in
// flight, is not idle however long ago it sent one: their callers commit again once
// answered. Counted from the last commit sent, a slow server's answers made every ack
// waiting go out alone, adding writes to the server that was slow.
func (c *ackCarrier) idleAfter() time.Duration { return max(c.wait/10, time.Millisecond) }

// nextLook is how long after now the wait of a call that began at start is looked at again:
// when it runs out, or when the store will have sent no commit for idleAfter (idleAfter
// from now while its group commit is busy), whichever comes first.
func (c *ackCarrier) nextLook(start, now time.Time) time.Duration {
	left := c.wait - now.Sub(start)
	idleIn := c.idleAfter() - now.Sub(time.Unix(0, c.lastCommit.Load()))
	if c.grouping() {
		idleIn = c.idleAfter()
	}
	return max(min(left, idleIn), 0)
}

// look sends what of items still waits when their call's wait ran out or the store is idle;
// otherwise it looks again later.
func (c *ackCarrier) look(items []*carriedAck, call *time.Timer, start time.Time) {
	if next := c.nextLook(start, time.Now()); next > 0 {
		call.Reset(next)
		return
	}
	c.sendAlone(items, ackWaiting, false)
}

// abandon ends the wait of items, whose caller's ctx ended: those still waiting are never
// sent. It returns ctx's error when none of items was sent or taken, nor any before them
// (resolved), else an error matching execstore.ErrOutcomeUnknown.
func (c *ackCarrier) abandon(ctx context.Context, items []*carriedAck, resolved bool) error {
	c.mu.Lock()
	var sent []*carriedAck
	for _, a := range items {
		if a.state == ackWaiting {
			c.remove(a)
			a.state = ackDone
			a.call.Stop()
			continue
		}
		sent = append(sent, a)
	}
	c.mu.Unlock()
	var errs []error
	for _, a := range sent {
		select {
		case <-a.done: // its write, or the commit's outcome, may already be known
			errs = append(errs, a.err)
		default:
			errs = append(errs, &execstore.OutcomeUnknownError{Op: a.op(), ExecutionID: a.source, Err: ctx.Err()})
		}
	}
	if len(sent) == 0 && !resolved {
		return ctx.Err() // never sent
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if len(sent) < len(items) { // some were never sent: the call did not finish
		return &execstore.OutcomeUnknownError{Op: items[0].op(), ExecutionID: items[0].source, Err: ctx.Err()}
	}
	return nil
}

func (a *carriedAck) op() string {
	if a.fired != nil {
		return "delete timer"
	}
	return "ack"
}

// take hands the acks waiting for source to a commit of it, which carries them. The commit
// resolves each with carried (its write won) or dropped (it did not, or may not have).
func (c *ackCarrier) take(source string) []*carriedAck {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	acks := c.waiting[source]
	if len(acks) == 0 {
		return nil
	}
	delete(c.waiting, source)
	for _, a := range acks {
		a.state = ackTaken // its call's wait, when it runs out, leaves it alone
	}
	return acks
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
	for _, a := range won {
		if a.fired != nil {
			c.s.stats.timersCarried.Add(1)
		} else {
			c.s.stats.acksCarried.Add(1)
		}
		close(a.done)
	}
}

// dropped resolves acks taken by a commit that lost, was refused, or may not have been
// applied: each is written alone.
func (c *ackCarrier) dropped(acks []*carriedAck) {
	if c == nil {
		return
	}
	c.sendAlone(acks, ackTaken, true)
}

// sendAlone writes each of items that is still in state from alone: its wait ran out
// (ackWaiting), or the commit that took it did not carry it (ackTaken). What else waits for
// the sources of items whose wait ran out goes with them (but for items whose caller gave
// up): no commit of those sources came within the wait. A source's several items go out as
// one request (removalsAsync), one statement on the MongoDB formulation; a lone ack goes
// through the store's coalescer; the other timer deletes of one DeleteTimers call go out
// together, as one bulk write per batch. With async they are
// submitted from a goroutine of their own: a store's worker (a commit that did not carry
// them) must never block on the store's full queue.
func (c *ackCarrier) sendAlone(items []*carriedAck, from ackState, async bool) {
	c.mu.Lock()
	var send []*carriedAck
	for _, a := range items {
		if a.state != from {
			continue
		}
		if from == ackWaiting {
			c.remove(a)
		}
		a.state = ackSending
		send = append(send, a)
	}
	if from == ackWaiting {
		for _, a := range send[:len(send):len(send)] {
			for _, other := range slices.Clone(c.waiting[a.source]) { // remove changes the list
				if other.ctx.Err() != nil {
					continue // its caller gave up: abandon takes it out, unsent
				}
				c.remove(other)
				other.state = ackSending
				send = append(send, other)
			}
		}
	}
	c.mu.Unlock()
	if len(send) == 0 {
		return
	}
	if async {
		go c.submitAlone(send)
		return
	}
	c.submitAlone(send)
}

// submitAlone submits the writes of send, each resolved by its outcome.
func (c *ackCarrier) submitAlone(send []*carriedAck) {
	var calls []*time.Timer
	deletes := map[*time.Timer][]*carriedAck{}
	bySource := map[string][]*carriedAck{}
	for _, a := range send {
		bySource[a.source] = append(bySource[a.source], a)
	}
	for _, a := range send {
		together := bySource[a.source]
		switch {
		case len(together) > 1:
			if together[0] == a { // once a source
				c.resolveEach(together, c.s.removalsAsync(together))
			}
			continue
		case a.fired == nil:
			c.resolve([]*carriedAck{a}, c.s.ackAloneAsync(a.ctx, a.source, a.seq))
			continue
		}
		if deletes[a.call] == nil {
			calls = append(calls, a.call)
		}
		deletes[a.call] = append(deletes[a.call], a)
	}
	for _, call := range calls {
		items := deletes[call]
		timers := make([]execstore.DueTimer, len(items))
		for i, a := range items {
			timers[i] = *a.fired
		}
		c.resolve(items, c.s.deleteTimersAloneAsync(items[0].ctx, timers))
	}
}

// resolve ends items, sent alone as one write, with its outcome. They share their ctx.
func (c *ackCarrier) resolve(items []*carriedAck, fut *Future[struct{}]) {
	go func() {
		_, err := fut.Wait(items[0].ctx)
		c.mu.Lock()
		for _, a := range items {
			a.err, a.state = err, ackDone
		}
		c.mu.Unlock()
		for _, a := range items {
			close(a.done)
		}
	}()
}

// resolveEach ends items, sent as one request, each with its own write's outcome, or all with
// the request's error when it ran no write.
func (c *ackCarrier) resolveEach(items []*carriedAck, fut *Future[[]error]) {
	go func() {
		errs, err := fut.Wait(context.Background()) // the request answers to its items' contexts
		c.mu.Lock()
		for i, a := range items {
			a.err, a.state = err, ackDone
			if len(errs) == len(items) {
				a.err = errs[i]
			}
		}
		c.mu.Unlock()
		for _, a := range items {
			close(a.done)
		}
	}()
}

// removalsAsync writes items, removals of one document (acks and timer deletes), in one
// request (opsrun.DocumentWrites): on the MongoDB formulation one statement that rewrites the
// document once. It answers to its items' contexts: it is given up only once every one of
// them ended. Its span is the first item's caller's child. It is recorded as one ack when
// it holds one, else as one timer delete, failed when any of its writes failed.
func (s *Store) removalsAsync(items []*carriedAck) *Future[[]error] {
	writes := make([]opsrun.IdempotentWrite, len(items))
	ctxs := make([]context.Context, len(items))
	kind := opDeleteTimer
	for i, a := range items {
		ctxs[i] = a.ctx
		if a.fired == nil {
			writes[i] = opsrun.OutboxAckWrite(a.source, a.seq)
			kind = opAckOutbox
		} else {
			writes[i] = opsrun.DeleteTimerWrite(a.source, a.fired.Path, a.fired.FireAt, a.fired.Version)
		}
	}
	all, release := async.AllDone(s.stop, ctxs)
	ctx, cancel := context.WithCancel(context.WithoutCancel(items[0].ctx)) // its values, all's end
	stop := context.AfterFunc(all, cancel)
	fut := submit(ctx, s, kind, items[0].source, func(ctx context.Context) ([]error, error) {
		errs := opsrun.DocumentWrites(ctx, s.env, writes, s.opts.MaxBatch)
		return errs, errors.Join(errs...)
	})
	go func() {
		<-fut.Done()
		stop()
		cancel()
		release()
	}()
	return fut
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
		a.call.Stop()
	}
	c.sendAlone(all, ackWaiting, false) // submitted before Close goes on
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
