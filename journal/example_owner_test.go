package journal_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/journal"
	"github.com/execstore/execstore/server"
)

// The owner and the unknown outcome. An owner is a name that outlives the process that
// claims under it (here "payments/charger", one per kind of worker or per shard of them):
// the process that replaces a killed one claims again under it, gets the fence back at the
// stored revision, and goes on from the stored checkpoint. A per-process owner would leave
// a killed process's invocations to no one: every other owner is refused. Two live
// processes under one owner are still fenced apart: each change names the revision it read.
//
// A write whose outcome is unknown (a network cut, a timeout) makes the journal refuse
// every change (ErrUncertain) until Reverify has read the invocation with a majority read.
// The caller goes on from what Reverify returns, never from what it had: the write may have
// landed or not. Here a journal whose every write times out (a 1ns WriteTimeout stands for
// the network cut) claims, and Reverify finds the claim the first process made.
func Example_ownerAndUnknownOutcome() {
	ctx := context.Background()
	srv, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()
	ring, err := journal.NewKeyRing(journal.NewKey("2026-01"))
	if err != nil {
		log.Fatal(err)
	}
	opts := journal.Options{Connection: server.Connection{Database: "example_owner"}, AcceptWeakDurability: true}
	id := journal.Identity{ID: "pay-order-2", Scope: "shop/payments", Digest: "sha256:9c1e"}

	// The first process claims and checkpoints, then is killed.
	first, err := journal.Open(ctx, srv.URI(), ring, opts)
	if err != nil {
		log.Fatal(err)
	}
	f, err := first.Claim(ctx, id, "payments/charger")
	if err != nil {
		log.Fatal(err)
	}
	if _, _, err = first.Checkpoint(ctx, f, journal.PhaseBefore, []byte(`{"amount":"12.00"}`)); err != nil {
		log.Fatal(err)
	}
	first.Close(ctx)

	// Its replacement claims under the same owner and goes on from the checkpoint.
	next, err := journal.Open(ctx, srv.URI(), ring, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer next.Close(ctx)
	f, err = next.Claim(ctx, id, "payments/charger")
	if err != nil {
		log.Fatal(err)
	}
	inv, err := next.Read(ctx, id.ID)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("claimed again at revision %d, from %s\n", f.Revision, inv.Checkpoint.State)
	_, err = next.Claim(ctx, id, "worker-pid-4711")
	fmt.Println("a per-process owner refused:", errors.Is(err, execstore.ErrConflict))

	// A journal whose writes are cut off.
	cutOpts := opts
	cutOpts.WriteTimeout = time.Nanosecond
	cut, err := journal.Open(ctx, srv.URI(), ring, cutOpts)
	if err != nil {
		log.Fatal(err)
	}
	defer cut.Close(ctx)
	_, err = cut.Claim(ctx, id, "payments/charger")
	fmt.Println("claim's outcome unknown:", errors.Is(err, execstore.ErrOutcomeUnknown))
	_, _, err = cut.Checkpoint(ctx, f, journal.PhaseAfter, []byte(`{"charged":true}`))
	fmt.Println("every change refused:", errors.Is(err, journal.ErrUncertain), cut.Uncertain())
	for _, uncertain := range cut.Uncertain() {
		inv, err := cut.Reverify(ctx, uncertain)
		if err != nil {
			log.Fatal(err) // still unknown: try again later; the journal stays closed
		}
		f = inv.Fence() // the truth: go on from here
	}
	fmt.Printf("after Reverify: uncertain about %d, owner %s at revision %d\n", len(cut.Uncertain()), f.Owner, f.Revision)
	// Output:
	// claimed again at revision 2, from {"amount":"12.00"}
	// a per-process owner refused: true
	// claim's outcome unknown: true
	// every change refused: true [pay-order-2]
	// after Reverify: uncertain about 0, owner payments/charger at revision 2
}
