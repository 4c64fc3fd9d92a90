package aio_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"sync/atomic"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/relay"
	"github.com/execstore/execstore/server"
)

// event is what executions send each other through the outbox, and what a fired timer raises.
type event struct {
	ID   string    `json:"id"`          // unique per event: the key of the dedupe set
	Type string    `json:"type"`        // "pay", "ship" or "close"
	At   time.Time `json:"at,omitzero"` // when it happened; time comes in events, not from the clock
}

// snapshot is the engine's state of one execution, stored opaque in Execution.Data.
type snapshot struct {
	State   string `json:"state"`
	Parcels int    `json:"parcels,omitempty"`
}

func encode(v any) []byte { b, _ := json.Marshal(v); return b }

func check(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// transition is the engine's model, with no I/O: it advances s and returns everything else the
// event changes. The store writes the two together in one atomic commit, so an order is never
// "paid" without its shipping request and its timer, nor the other way round.
func transition(exe *execstore.Execution, s *snapshot, ev event) execstore.Commit {
	c := execstore.Commit{ProcessedEventID: ev.ID}
	switch ev.Type {
	case "pay": // ask the warehouse to ship, and close the order a minute after payment
		s.State = "paid"
		c.Emits = []execstore.Emit{{TargetID: "warehouse", Event: encode(event{ID: "ship-" + exe.ID, Type: "ship"})}}
		c.Timers = []execstore.TimerOp{execstore.ScheduleTimer("Paid.Close", ev.At.Add(time.Minute))}
	case "ship":
		s.Parcels++
	case "close":
		s.State, exe.Status = "closed", execstore.Done
	}
	return c
}

// handle applies one delivered event to execution target once, however many times it is
// delivered: load with the dedupe answer, skip what is processed, commit the rest.
func handle(ctx context.Context, store execstore.Store, target string, ev event) error {
	for {
		exe, processed, err := store.LoadForEvent(ctx, target, ev.ID)
		if err != nil {
			return err
		}
		if exe == nil {
			return fmt.Errorf("%s: no such execution", target)
		}
		if processed { // a redelivery: the first delivery's commit already holds its effects
			fmt.Printf("  %s skips %s: already processed\n", target, ev.ID)
			return nil
		}
		var s snapshot
		if err := json.Unmarshal(exe.Data, &s); err != nil {
			return err
		}
		c := transition(exe, &s, ev)
		exe.Data = encode(s)
		_, err = store.Commit(ctx, exe, c)
		switch {
		case err == nil:
			fmt.Printf("  %s handles %s: v%d %s\n", target, ev.ID, exe.Version, exe.Data)
			return nil
		case errors.Is(err, execstore.ErrAlreadyProcessed):
			// Processed since LoadForEvent answered (or unknown to a store's snapshot cache):
			// nothing of ours was written, and the event needs nothing more.
			fmt.Printf("  %s skips %s: already processed\n", target, ev.ID)
			return nil
		case errors.Is(err, execstore.ErrConflict), errors.Is(err, execstore.ErrOutcomeUnknown):
			// Conflict: another handler committed first and nothing of ours was written. Outcome
			// unknown: ours may have landed. Either way, reload and look again; never retry blind.
			continue
		default:
			return err
		}
	}
}

// deliver runs a relay (package relay) over store until the outbox is empty: it hands each
// pending entry to handle, then acks it. Delivering before acking means a crash in between
// delivers the entry again (at least once); handle's dedupe makes the second delivery a no-op
// (exactly once in effect). One lane delivers the entries one after the other, so that the
// example prints in order; a runtime uses many, and one execution's entries never run at once.
// dieBeforeAcking names an event whose entry is handled and never acked, as by a process killed
// at that moment.
func deliver(ctx context.Context, store execstore.Store, dieBeforeAcking string) error {
	var dead atomic.Bool
	r := relay.New(store, func(ctx context.Context, e execstore.OutboxEntry) error {
		if dead.Load() {
			return relay.ErrLeavePending // the process is gone: nothing more is handled or acked
		}
		var ev event
		if err := json.Unmarshal(e.Event, &ev); err != nil {
			return err
		}
		if err := handle(ctx, store, e.TargetID, ev); err != nil {
			return err // left pending: delivered again later
		}
		if ev.ID == dieBeforeAcking {
			fmt.Printf("  the process dies before acking %s\n", ev.ID)
			dead.Store(true)
			return relay.ErrLeavePending
		}
		return nil
	}, relay.Options{Lanes: 1})
	return runUntil(ctx, r, func() bool {
		pending, err := store.PendingOutbox(ctx, 0)
		check(err)
		return len(pending) == 0 || dead.Load()
	})
}

// fire runs a sweeper (package relay) whose clock says now until no timer is due: it hands
// each due timer to handle as an event, then deletes it. As with the relay, a crash between
// the two fires a timer again; the event id is the timer's path and fire time, so the dedupe
// set catches the second firing. A timer is deleted only if it still fires at the time the
// sweeper saw, so one re-armed in the meantime survives.
func fire(ctx context.Context, store execstore.Store, now time.Time) error {
	fmt.Printf("sweep at %s\n", now.Format(time.RFC3339))
	sw := relay.NewSweeper(store, func(ctx context.Context, t execstore.DueTimer) error {
		id := t.Path + "@" + t.FireAt.Format(time.RFC3339Nano)
		return handle(ctx, store, t.ExecutionID, event{ID: id, Type: "close", At: t.FireAt})
	}, relay.Options{Lanes: 1, Clock: func() time.Time { return now }})
	return runUntil(ctx, sw, func() bool {
		due, err := store.DueTimers(ctx, now, 0)
		check(err)
		return len(due) == 0
	})
}

// runUntil runs r until done says its work is over, then closes it.
func runUntil(ctx context.Context, r interface {
	Run(context.Context) error
	Close(context.Context) error
}, done func() bool) error {
	ran := make(chan error, 1)
	go func() { ran <- r.Run(ctx) }()
	for !done() {
		time.Sleep(time.Millisecond)
	}
	return errors.Join(r.Close(ctx), <-ran)
}

// A whole small engine on the store: two orders and a warehouse, a relay for the outbox, a
// sweeper for timers (both from package relay), and a restart halfway through. Here each runs
// until its work is done; a runtime runs them for as long as it runs, woken by its commits.
func Example_engine() {
	ctx := context.Background()
	opening := time.Date(2030, time.March, 17, 17, 46, 40, 0, time.UTC) // the first payment
	srv, err := embedded.Start(ctx, embedded.Options{})                 // use your MongoDB's URI instead
	check(err)
	defer srv.Close()
	store, err := aio.Open(ctx, srv.URI(), aio.Options{Connection: server.Connection{Database: "engine"}})
	check(err)

	// Create the executions: a commit at version 0 creates. Each order's first event (its
	// payment, standing in for a payment service) is queued by the same atomic write, so no
	// crash leaves an order that never hears of it.
	for i, id := range []string{"order-1", "order-2"} {
		exe := &execstore.Execution{ID: id, DefinitionID: "order", Status: execstore.Running, Data: encode(snapshot{State: "cart"})}
		pay := event{ID: "pay-" + id, Type: "pay", At: opening.Add(time.Duration(i) * 50 * time.Second)}
		_, err := store.Commit(ctx, exe, execstore.Commit{Emits: []execstore.Emit{{TargetID: id, Event: encode(pay)}}})
		check(err)
	}
	warehouse := &execstore.Execution{ID: "warehouse", DefinitionID: "warehouse", Status: execstore.Running, Data: encode(snapshot{State: "open"})}
	_, err = store.Commit(ctx, warehouse, execstore.Commit{})
	check(err)

	// First life: the relay delivers both payments, and the process dies before acking the
	// second.
	check(deliver(ctx, store, "pay-order-2"))

	// Restart. Everything committed is in the database: snapshots, dedupe sets, the outbox
	// entries not yet acked and the timers. A killed process would skip Close and lose nothing
	// either: each commit was written whole or not at all.
	check(store.Close(ctx))
	store, err = aio.Open(ctx, srv.URI(), aio.Options{Connection: server.Connection{Database: "engine"}})
	check(err)
	defer store.Close(ctx)
	fmt.Println("restart: a new store on the same database")

	// Second life: the unacked payment comes round again and is recognised; the shipping
	// requests and the timers the first life committed are carried out.
	check(deliver(ctx, store, ""))
	check(fire(ctx, store, opening.Add(100*time.Second))) // order-2's timer, due at 17:48:30, waits
	check(fire(ctx, store, opening.Add(200*time.Second)))
	// A sweep that died before DeleteTimers would fire a timer again: it is recognised too.
	fmt.Println("order-1's timer fires again")
	check(handle(ctx, store, "order-1", event{ID: "Paid.Close@2030-03-17T17:47:40Z", Type: "close"}))
	// A worker of the first life that wakes up late with its copy of the warehouse at version 1
	// cannot overwrite what was done since: its commit is refused and writes nothing. If the
	// event it handled has been processed since, that is what the refusal says.
	_, err = store.Commit(ctx, warehouse, execstore.Commit{ProcessedEventID: "ship-order-1"})
	var done *execstore.AlreadyProcessedError
	if errors.As(err, &done) {
		fmt.Printf("late commit refused: %s was processed (found at v%d)\n", done.EventID, done.Version)
	}
	_, err = store.Commit(ctx, warehouse, execstore.Commit{ProcessedEventID: "restock"})
	var conflict *execstore.ConflictError
	if errors.As(err, &conflict) {
		fmt.Printf("stale commit refused: expected v%d, found v%d\n", conflict.Expected, conflict.Found)
	}

	for _, id := range []string{"order-1", "order-2", "warehouse"} {
		exe, err := store.Load(ctx, id)
		check(err)
		fmt.Printf("%s v%d %s %s\n", exe.ID, exe.Version, exe.Status, exe.Data)
	}
	pending, _ := store.PendingOutbox(ctx, 0)
	due, _ := store.DueTimers(ctx, opening.AddDate(1, 0, 0), 0)
	fmt.Printf("left: %d outbox entries, %d timers\n", len(pending), len(due))
	// Output:
	//   order-1 handles pay-order-1: v2 {"state":"paid"}
	//   order-2 handles pay-order-2: v2 {"state":"paid"}
	//   the process dies before acking pay-order-2
	// restart: a new store on the same database
	//   order-2 skips pay-order-2: already processed
	//   warehouse handles ship-order-1: v2 {"state":"open","parcels":1}
	//   warehouse handles ship-order-2: v3 {"state":"open","parcels":2}
	// sweep at 2030-03-17T17:48:20Z
	//   order-1 handles Paid.Close@2030-03-17T17:47:40Z: v3 {"state":"closed"}
	// sweep at 2030-03-17T17:50:00Z
	//   order-2 handles Paid.Close@2030-03-17T17:48:30Z: v3 {"state":"closed"}
	// order-1's timer fires again
	//   order-1 skips Paid.Close@2030-03-17T17:47:40Z: already processed
	// late commit refused: ship-order-1 was processed (found at v3)
	// stale commit refused: expected v1, found v3
	// order-1 v3 DONE {"state":"closed"}
	// order-2 v3 DONE {"state":"closed"}
	// warehouse v3 RUNNING {"state":"open","parcels":2}
	// left: 0 outbox entries, 0 timers
}
