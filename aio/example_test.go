package aio_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/embedded"
)

// An engine handles one event: load the execution with its dedupe answer in one round trip,
// advance the snapshot, and commit the outgoing event, the dedupe mark, a timer and a trace
// step in one atomic write. A relay then delivers the outbox. The data stays in
// execstore-data, where "go run ./cmd/execstore -embedded aio/execstore-data show order-1"
// reads it.
func Example() {
	ctx := context.Background()

	// A MongoDB-compatible server inside the process, keeping its data in ./execstore-data;
	// use your MongoDB's URI instead. Each run starts from an empty directory.
	if err := os.RemoveAll("execstore-data"); err != nil {
		log.Fatal(err)
	}
	srv, err := embedded.Start(ctx, embedded.Options{Dir: "execstore-data"})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	store, err := aio.Open(ctx, srv.URI(), aio.Options{}) // database "execstore"
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)

	// Create the execution (version 0 → 1).
	order := &execstore.Execution{ID: "order-1", DefinitionID: "checkout", Status: execstore.Running,
		Data: []byte(`{"state":"cart"}`)}
	if err := store.Save(ctx, order); err != nil {
		log.Fatal(err)
	}

	// Handle event "evt-1".
	exe, processed, err := store.LoadForEvent(ctx, "order-1", "evt-1")
	if err != nil || processed {
		log.Fatal(err, processed)
	}
	exe.Data = []byte(`{"state":"paid"}`)
	seqs, err := store.Commit(ctx, exe, execstore.Commit{
		Emits:            []execstore.Emit{{TargetID: "shipping-1", Event: []byte(`{"id":"evt-2","type":"ship"}`)}},
		ProcessedEventID: "evt-1",
		Timers:           []execstore.TimerOp{execstore.ScheduleTimer("Paid.Reminder", time.Date(2030, time.March, 17, 17, 46, 40, 0, time.UTC))},
		Trace:            map[string]any{"from": "cart", "to": "paid"},
	})
	if err != nil {
		log.Fatal(err) // errors.Is(err, execstore.ErrConflict): reload and retry
	}
	fmt.Println("version", exe.Version, "outbox seqs", len(seqs))

	// A redelivered "evt-1" is recognised.
	_, processed, _ = store.LoadForEvent(ctx, "order-1", "evt-1")
	fmt.Println("evt-1 already processed:", processed)

	// The relay delivers and acks.
	pending, _ := store.PendingOutbox(ctx, 100)
	for _, p := range pending {
		fmt.Printf("deliver %s to %s\n", p.Event, p.TargetID)
		_ = store.AckOutbox(ctx, p.SourceID, p.Seq)
	}
	// Output:
	// version 2 outbox seqs 1
	// evt-1 already processed: true
	// deliver {"id":"evt-2","type":"ship"} to shipping-1
}
