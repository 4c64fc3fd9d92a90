package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/relay"
)

// The chain workload's relay processes run the handler of chainHandler: each event of a
// chain is handled as an engine handles one, loaded with the dedupe answer, then committed
// with its dedupe mark and the chain's next event.

// chainLanes is the Lanes of the chain workload's relays, relay's default: more than the
// default 16 chains, so that a hop never queues behind another chain's handler.
const chainLanes = 64

// chainCacheSize is the snapshot cache of the chain workload's stores (aio.Options.CacheSize),
// as an engine runs them: a hop's handler loads an execution its process committed last
// whenever the previous hop ran there.
const chainCacheSize = 4096

// chainEvent is one event of a chain, the payload of its outbox entries: hop Hop of chain
// Chain, whose last hop is Of. Hop 0 is the seed, committed by the bench.
type chainEvent struct {
	Chain int `json:"chain"`
	Hop   int `json:"hop"`
	Of    int `json:"of"`
}

// id is the event's id, the key of the dedupe set.
func (e chainEvent) id() string { return fmt.Sprintf("chain%d/%d", e.Chain, e.Hop) }

// chainSnapshot is a chain execution's state: the hops it handled, in the order it
// committed them.
type chainSnapshot struct {
	Hops []int `json:"hops"`
}

// chainStore is what the chain's handler needs of the process's store.
type chainStore interface {
	LoadForEvent(ctx context.Context, id, eventID string) (*execstore.Execution, bool, error)
	Commit(ctx context.Context, exe *execstore.Execution, c execstore.Commit) ([]int64, error)
}

// chainHandler returns the relay handler of the chain workload. For an event of hop k to
// execution x it loads x with the dedupe answer and, unless the event is processed, commits
// x's snapshot with the hop appended, the event's dedupe mark and, below the last hop, hop
// k+1 to the other execution of the pair, the entry's source; it reloads after a conflict
// or an unknown outcome. Each call logs a "hop" line: the handler's start, the commit's
// return (Emitted, when it emitted), whether the event was found processed (Duplicate),
// what a refused commit was told (Refused) and, for a call that failed, its error (Failed:
// a commit it sent may have been applied, as when a lost lease cancels its context). The
// first handling of each chain's hop Of-1 returns relay.ErrLeavePending after its commit,
// as a process that died before the ack would: the relay delivers it again, and the dedupe
// answer must recognise it. No later item waits behind it: its target gets no hop Of+1.
func chainHandler(store chainStore, log lineLog) func(context.Context, execstore.OutboxEntry) error {
	return func(ctx context.Context, e execstore.OutboxEntry) error {
		start := time.Now()
		var ev chainEvent
		if err := json.Unmarshal(e.Event, &ev); err != nil {
			return fmt.Errorf("%w: chain event %q: %v", relay.ErrPermanent, e.Event, err)
		}
		line := deliveryLine{Kind: "hop", Source: e.SourceID, Seq: e.Seq, Chain: ev.Chain, Hop: ev.Hop, Start: start.UnixNano()}
		err := handleChainEvent(ctx, store, e.TargetID, ev, &line)
		if err != nil {
			line.Failed = err.Error()
		}
		line.End = time.Now().UnixNano()
		log.write(line)
		if err == nil && !line.Duplicate && ev.Hop == ev.Of-1 {
			return relay.ErrLeavePending
		}
		return err
	}
}

// handleChainEvent applies ev to execution target once, as chainHandler says, and records in
// line what it found and did.
func handleChainEvent(ctx context.Context, store chainStore, target string, ev chainEvent, line *deliveryLine) error {
	unknown := false // a commit of ours whose outcome is unknown, not known since to have failed
	for {
		exe, processed, err := store.LoadForEvent(ctx, target, ev.id())
		if err != nil {
			return err
		}
		if exe == nil {
			return fmt.Errorf("%w: chain execution %s: not found", relay.ErrPermanent, target)
		}
		if processed {
			if unknown && ev.Hop < ev.Of {
				// Our commit landed after all, its emit with it, no later than now. (Had
				// another handling's, the checks would find the hop handled twice.)
				line.Emitted = time.Now().UnixNano()
			} else {
				line.Duplicate = !unknown
			}
			return nil
		}
		unknown = false
		var s chainSnapshot
		if err := json.Unmarshal(exe.Data, &s); err != nil {
			return fmt.Errorf("%w: chain execution %s: %v", relay.ErrPermanent, exe.ID, err)
		}
		s.Hops = append(s.Hops, ev.Hop)
		exe.Data, _ = json.Marshal(s)
		c := execstore.Commit{ProcessedEventID: ev.id()}
		if ev.Hop < ev.Of {
			// The source of the entry that brought ev is the pair's other execution.
			c.Emits = []execstore.Emit{{TargetID: line.Source, Event: chainEventBytes(chainEvent{Chain: ev.Chain, Hop: ev.Hop + 1, Of: ev.Of})}}
		}
		_, err = store.Commit(ctx, exe, c)
		switch {
		case err == nil:
			if len(c.Emits) > 0 {
				line.Emitted = time.Now().UnixNano()
			}
			return nil
		case errors.Is(err, execstore.ErrAlreadyProcessed):
			line.Duplicate, line.Refused = true, "already processed"
			return nil
		case errors.Is(err, execstore.ErrOutcomeUnknown):
			unknown, line.Refused = true, "outcome unknown"
		case errors.Is(err, execstore.ErrConflict):
			line.Refused = "conflict"
		default:
			return err
		}
	}
}

// chainEventBytes is ev as an outbox entry's payload.
func chainEventBytes(ev chainEvent) []byte {
	b, _ := json.Marshal(ev)
	return b
}
