package aio_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/aio"
	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/server"
)

// With the snapshot cache on, a process that owns its executions handles each event in one
// round trip: LoadForEvent answers from memory, and the commit is the one command. An event
// the cache cannot know was processed (here, committed by another process) is refused by the
// commit's dedupe guard, and nothing is written: the handler acks it and moves on.
func ExampleOptions_cacheSize() {
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	store, err := aio.Open(ctx, srv.URI(), aio.Options{Connection: server.Connection{Database: "example_cache"}, CacheSize: 10_000})
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close(ctx)
	other, err := aio.Open(ctx, srv.URI(), aio.Options{Connection: server.Connection{Database: "example_cache"}}) // another process
	if err != nil {
		log.Fatal(err)
	}
	defer other.Close(ctx)

	handle := func(id, event string) {
		exe, processed, err := store.LoadForEvent(ctx, id, event)
		if err != nil || exe == nil || processed {
			fmt.Println(event, "skipped:", err, processed)
			return
		}
		exe.Data = fmt.Appendf(nil, `{"last":%q}`, event)
		_, err = store.Commit(ctx, exe, execstore.Commit{ProcessedEventID: event})
		switch {
		case err == nil:
			fmt.Printf("%s handled: v%d\n", event, exe.Version)
		case errors.Is(err, execstore.ErrAlreadyProcessed):
			fmt.Println(event, "already processed: ack it, nothing written")
		default:
			fmt.Println(event, "failed:", err) // a conflict: load again and retry
		}
	}

	order := &execstore.Execution{ID: "order-1", DefinitionID: "checkout", Status: execstore.Running, Data: []byte(`{}`)}
	if err := store.Save(ctx, order); err != nil {
		log.Fatal(err)
	}
	handle("order-1", "evt-1")
	handle("order-1", "evt-2")
	handle("order-1", "evt-1") // a redelivery this process committed: the cache knows it

	// Another process handles evt-3 on order-1 (the cache is now stale, and does not know).
	theirs, _ := other.Load(ctx, "order-1")
	if _, err := other.Commit(ctx, theirs, execstore.Commit{ProcessedEventID: "evt-3"}); err != nil {
		log.Fatal(err)
	}
	handle("order-1", "evt-3")
	handle("order-1", "evt-4") // the stale entry was dropped: this reads the server

	st := store.Stats()
	fmt.Println("answered from the cache:", st.CacheHits, "read from the server:", st.CacheMisses)
	// Output:
	// evt-1 handled: v2
	// evt-2 handled: v3
	// evt-1 skipped: <nil> true
	// evt-3 already processed: ack it, nothing written
	// evt-4 handled: v5
	// answered from the cache: 4 read from the server: 1
}
