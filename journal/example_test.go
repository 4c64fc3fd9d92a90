package journal_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/execstore/execstore"
	"github.com/execstore/execstore/embedded"
	"github.com/execstore/execstore/journal"
	"github.com/execstore/execstore/server"
)

// The whole life of one payment: claimed by its first owner, checkpointed, prepared from
// that checkpoint, handed out once, reconciled by its receipt; an UNKNOWN attempt is never
// handed out again. Then the key is rotated: the old record stays readable.
func Example() {
	ctx := context.Background()
	// A MongoDB-compatible server inside the process; use your replica set's URI instead.
	srv, err := embedded.Start(ctx, embedded.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Close()

	// Keys come from your secret store; here, fresh ones.
	k1 := journal.NewKey("2026-01")
	ring, err := journal.NewKeyRing(k1)
	if err != nil {
		log.Fatal(err)
	}
	// The embedded server is a single node: opting in to weak durability is explicit.
	opts := journal.Options{Connection: server.Connection{Database: "example_journal"}, AcceptWeakDurability: true}
	j, err := journal.Open(ctx, srv.URI(), ring, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer j.Close(ctx)

	id := journal.Identity{ID: "pay-order-1", Scope: "shop/payments", Digest: "sha256:4f2a"}
	f, err := j.Claim(ctx, id, "worker-a")
	if err != nil {
		log.Fatal(err)
	}
	_, err = j.Claim(ctx, id, "worker-b")
	fmt.Println("second owner refused:", errors.Is(err, execstore.ErrConflict))

	f, ckpt, err := j.Checkpoint(ctx, f, journal.PhaseBefore, []byte(`{"cart":"c-7","amount":"42.00"}`))
	if err != nil {
		log.Fatal(err)
	}
	f, err = j.Prepare(ctx, f, ckpt, []byte(`POST /charges amount=42.00`))
	if err != nil {
		log.Fatal(err)
	}
	attempt, err := j.Dispatch(ctx, f)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("attempt %d runs: %s\n", attempt.N, attempt.Operation)
	// The gateway timed out: no one knows whether the card was charged.
	f, err = j.Reconcile(ctx, attempt.Fence, journal.Receipt{Attempt: attempt.N, Outcome: journal.Unknown})
	if err != nil {
		log.Fatal(err)
	}
	_, err = j.Dispatch(ctx, f)
	fmt.Println("handed out again:", !errors.Is(err, journal.ErrNoReplay))
	// The gateway's records say it was: the receipt settles the attempt.
	f, err = j.Reconcile(ctx, f, journal.Receipt{Attempt: attempt.N, Outcome: journal.Succeeded, Data: []byte(`charge ch_91`)})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("revision:", f.Revision)

	// Rotation: a new primary key, the old one kept for reading.
	rotated, err := journal.NewKeyRing(journal.NewKey("2026-02"), k1)
	if err != nil {
		log.Fatal(err)
	}
	j2, err := journal.Open(ctx, srv.URI(), rotated, opts)
	if err != nil {
		log.Fatal(err)
	}
	defer j2.Close(ctx)
	inv, err := j2.Read(ctx, id.ID)
	if err != nil {
		log.Fatal(err)
	}
	last := inv.Receipts[len(inv.Receipts)-1]
	fmt.Printf("read after rotation: %s, receipt %s %q\n", inv.Checkpoint.State, last.Outcome, last.Data)
	// Output:
	// second owner refused: true
	// attempt 1 runs: POST /charges amount=42.00
	// handed out again: false
	// revision: 6
	// read after rotation: {"cart":"c-7","amount":"42.00"}, receipt succeeded "charge ch_91"
}
