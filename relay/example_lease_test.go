package relay_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/idem"
	"github.com/execstore/execstore/relay"
	"github.com/execstore/execstore/server"
)

// deliver stands for the engine's own delivery: it hands event to execution target (load it,
// advance it, commit). It is what a relay's handler calls.
func deliver(_ context.Context, target string, event []byte) error {
	fmt.Printf("deliver %s to %s\n", event, target)
	return nil
}

// exampleDatabase is a database no earlier run of the examples wrote to.
func exampleDatabase() string { return fmt.Sprintf("relay_example_%d", time.Now().UnixNano()) }

// waitFor polls done until it holds; the examples wait on what the relay reports, not on a
// clock.
func waitFor(done func() bool) {
	for !done() {
		time.Sleep(time.Millisecond)
	}
}

// A relay over a MongoDB store, with leases, so that the relays every process runs on this
// database share its partitions. The leases live in an idem store on the same server and
// database. Alone, the relay holds every partition.
func Example_lease() {
	ctx := context.Background()
	uri, db := srv.URI, exampleDatabase() // the server the package's tests run on

	store, err := aio.Open(ctx, uri, aio.Options{Connection: server.Connection{Database: db}}) // the executions
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
	leases, err := idem.Open(ctx, uri, idem.Options{Connection: server.Connection{Database: db + "_leases"}}) // the relays' leases
	if err != nil {
		log.Fatal(err)
	}
	defer leases.Close(ctx)

	r := relay.New(store, func(ctx context.Context, e execstore.OutboxEntry) error {
		return deliver(ctx, e.TargetID, e.Event) // nil: the entry is acked; an error: retried
	}, relay.Options{Lease: leases})
	go r.Run(ctx)
	defer r.Close(ctx)

	order := &execstore.Execution{ID: "order-1", DefinitionID: "checkout", Status: execstore.Running}
	if _, err := store.Commit(ctx, order, execstore.Commit{Emits: []execstore.Emit{
		{TargetID: "shipping-1", Event: []byte("reserve")},
		{TargetID: "shipping-1", Event: []byte("ship")},
	}}); err != nil {
		log.Fatal(err)
	}

	waitFor(func() bool { return r.Stats().Acked == 2 })  // acked once deliver returned nil
	fmt.Println("partitions held:", r.Stats().Partitions) // every one: no other relay runs
	if err := r.Close(ctx); err != nil {                  // releases the leases: other relays take over at once
		log.Fatal(err)
	}
	left, err := store.PendingOutbox(ctx, 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("pending:", len(left))
	// Output:
	// deliver reserve to shipping-1
	// deliver ship to shipping-1
	// partitions held: 64
	// pending: 0
}

// A sweeper fires the timers whose fire time has come, and deletes each once its handler
// returned nil; a timer not yet due stays. It runs on any execstore.Store, here a MongoDB
// one; give it Options.Lease as a relay's to have the processes share the firing.
func ExampleSweeper() {
	ctx := context.Background()
	store, err := aio.Open(ctx, srv.URI, aio.Options{Connection: server.Connection{Database: exampleDatabase()}})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)

	now := time.Now()
	order := &execstore.Execution{ID: "order-2", DefinitionID: "checkout", Status: execstore.Running}
	if _, err := store.Commit(ctx, order, execstore.Commit{Timers: []execstore.TimerOp{
		execstore.ScheduleTimer("Cart.Expiry", now.Add(-time.Minute)), // due
		execstore.ScheduleTimer("Paid.Reminder", now.Add(time.Hour)),  // not yet
	}}); err != nil {
		log.Fatal(err)
	}

	sw := relay.NewSweeper(store, func(ctx context.Context, t execstore.DueTimer) error {
		return deliver(ctx, t.ExecutionID, []byte(t.Path)) // nil: the timer is deleted; an error: retried
	}, relay.Options{})
	go sw.Run(ctx)
	defer sw.Close(ctx)

	waitFor(func() bool { return sw.Stats().Acked == 1 }) // deleted once the handler returned nil
	left, err := store.DueTimers(ctx, now.Add(2*time.Hour), 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("left:", left[0].ExecutionID, left[0].Path)
	// Output:
	// deliver Cart.Expiry to order-2
	// left: order-2 Paid.Reminder
}
