package relay_test

import (
	"context"
	"fmt"
	"log"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// A relay on an in-memory store: a commit emits three events to one execution; the relay,
// woken by the commit, delivers them in order and acks each once its handler returned nil.
func Example() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{})
	defer store.Close(ctx)

	delivered := make(chan struct{})
	n := 0
	r := relay.New(store, func(ctx context.Context, e execstore.OutboxEntry) error {
		fmt.Printf("deliver %s to %s\n", e.Event, e.TargetID) // an engine would handle it here
		if n++; n == 3 {
			close(delivered)
		}
		return nil // the entry is acked
	}, relay.Options{})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	order := &execstore.Execution{ID: "order-1", DefinitionID: "checkout", Status: execstore.Running}
	if _, err := store.Commit(ctx, order, execstore.Commit{Emits: []execstore.Emit{
		{TargetID: "shipping-1", Event: []byte("reserve")},
		{TargetID: "shipping-1", Event: []byte("pack")},
		{TargetID: "shipping-1", Event: []byte("ship")},
	}}); err != nil {
		log.Fatal(err)
	}

	<-delivered
	if err := r.Close(ctx); err != nil { // waits for the acks
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	left, _ := store.PendingOutbox(ctx, 0)
	fmt.Println("pending:", len(left), "acked:", r.Stats().Acked)
	// Output:
	// deliver reserve to shipping-1
	// deliver pack to shipping-1
	// deliver ship to shipping-1
	// pending: 0 acked: 3
}
