package memstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/memstore"
	"github.com/execstore/execstore/relay"
)

// A relay with leases, all in memory: the relay registers itself and claims the store's
// partitions in a Leases as it would in an idem store, and releases them when it stops. Give
// LeasesOptions.Clock a clock of your own, or run the test in a testing/synctest bubble, to
// move the leases' time.
func ExampleLeases() {
	ctx := context.Background()
	store := memstore.New(memstore.Options{Partitions: 4})
	defer store.Close(ctx)
	leases := memstore.NewLeases(memstore.LeasesOptions{})
	defer leases.Close(ctx)

	r := relay.New(store, func(ctx context.Context, e execstore.OutboxEntry) error {
		fmt.Printf("deliver %s to %s\n", e.Event, e.TargetID) // an engine would handle it here
		return nil                                            // the entry is acked
	}, relay.Options{Lease: leases, LeaseKey: "orders/relay"})
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	order := &execstore.Execution{ID: "order-1", DefinitionID: "checkout", Status: execstore.Running}
	if _, err := store.Commit(ctx, order, execstore.Commit{Emits: []execstore.Emit{
		{TargetID: "shipping-1", Event: []byte("reserve")},
		{TargetID: "shipping-1", Event: []byte("ship")},
	}}); err != nil {
		log.Fatal(err)
	}
	for r.Stats().Acked < 2 || r.Stats().Partitions < 4 { // the relay reports; no clock is read
		time.Sleep(time.Millisecond)
	}

	members, err := leases.List(ctx, "orders/relay/members/", 0) // the relays alive
	if err != nil {
		log.Fatal(err)
	}
	parts, err := leases.List(ctx, "orders/relay/partitions/", 0) // one lease per partition
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("members:", len(members))
	for _, p := range parts {
		fmt.Println(p.Key, "held by the member:", p.Holder == members[0].Holder)
	}
	if err := r.Close(ctx); err != nil { // releases the leases: another relay would take them at once
		log.Fatal(err)
	}
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	parts, err = leases.List(ctx, "orders/relay/partitions/", 0)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("partition leases left:", len(parts))
	// Output:
	// deliver reserve to shipping-1
	// deliver ship to shipping-1
	// members: 1
	// orders/relay/partitions/0 held by the member: true
	// orders/relay/partitions/1 held by the member: true
	// orders/relay/partitions/2 held by the member: true
	// orders/relay/partitions/3 held by the member: true
	// partition leases left: 0
}
