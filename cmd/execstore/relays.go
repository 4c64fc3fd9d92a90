package main

import (
	"context"
	"fmt"
	"io"
	"strconv"

	"go.mongodb.org/mongo-driver/v2/mongo"

	"github.com/execstore/execstore/internal/inspect"
	"github.com/execstore/execstore/ops"
)

// The lease keys of a Relay and of a Sweeper by default.
const (
	relayLeaseKey   = inspect.RelayLeaseKey
	sweeperLeaseKey = inspect.SweeperLeaseKey
)

// relaysOptions name the relays `relays` prints.
type relaysOptions struct {
	output
	Collection string // the leases' collection; "" to look where relays keep them
	LeaseKey   string
	// Sweepers: the lease key is the relays' default, not asked for; the sweepers' leases
	// under their default key are printed after the relays' when there are any (text only).
	Sweepers bool
}

// listRelays prints the relays sharing the lease key's partitions: the server's clock, then
// one find of the lease key's records on the _id index (see inspect.ReadRelays), in
// o.Collection of db, or else in each of inspect.LeaseStores until one holds some; then,
// with o.Sweepers, the same of the sweepers' lease key.
func listRelays(ctx context.Context, db *mongo.Database, w io.Writer, o relaysOptions) error {
	stores := inspect.LeaseStores(db, "idempotency", ops.ExecutionsCollection)
	if o.Collection != "" {
		stores = []*mongo.Collection{db.Collection(o.Collection)}
	}
	r, err := inspect.ReadRelaysIn(ctx, stores, o.LeaseKey, o.Now)
	if err != nil {
		return err
	}
	if err := emit(w, o.output, r, writeRelays); err != nil || o.JSON || !o.Sweepers {
		return err
	}
	s, err := inspect.ReadRelaysIn(ctx, stores, sweeperLeaseKey, o.Now)
	if err != nil || len(s.Members)+len(s.Partitions) == 0 {
		return err
	}
	fmt.Fprintln(w)
	return writeRelays(w, s)
}

// writeRelays writes the relays and the partitions' leases for people.
func writeRelays(w io.Writer, r *inspect.Relays) error {
	fmt.Fprintf(w, "relays of lease key %s in %s (now %s, %s clock)\n\n", plain(r.LeaseKey), plain(r.Source), r.Now, r.Clock)
	if len(r.Members) == 0 && len(r.Partitions) == 0 {
		_, err := fmt.Fprintln(w, "none: no relay registered and no lease held under this lease key")
		return err
	}
	var problems []string
	if len(r.Members) == 0 {
		fmt.Fprintln(w, "members: none")
	} else {
		live := 0
		rows := make([][]string, len(r.Members))
		for i, m := range r.Members {
			parts := strconv.Itoa(m.Held)
			if m.Partitions != nil {
				parts += " of " + strconv.Itoa(*m.Partitions)
			}
			remaining := relativeTo(m.ExpiresAt, r.Now)
			if m.Lapsed {
				remaining += " (lapsed)"
			} else {
				live++
			}
			rows[i] = []string{plain(m.Name), parts, orDash(m.RegisteredAt), orDash(m.ExpiresAt), remaining}
			for _, p := range m.Problems {
				problems = append(problems, plain(m.Key)+": "+plain(p))
			}
		}
		fmt.Fprintf(w, "members: %d, %d live\n", len(r.Members), live)
		if err := table(w, "  ", []string{"MEMBER", "HOLDS", "REGISTERED AT", "EXPIRES AT", "REMAINING"}, rows); err != nil {
			return err
		}
	}
	held := 0
	rows := make([][]string, len(r.Partitions))
	for i, l := range r.Partitions {
		holder := "nobody"
		switch {
		case l.Held && l.Holder != "":
			holder = plain(l.Holder)
			held++
		case l.Held:
			holder = "a relay (unnamed)"
			held++
		case l.Lapsed && l.Holder != "":
			holder = "nobody (lapsed: " + plain(l.Holder) + ")"
		case l.Lapsed:
			holder = "nobody (lapsed)"
		case len(l.Problems) > 0:
			holder = "not a relay's lease"
		}
		takeOver := "-"
		if l.TakenOver {
			takeOver = "yes"
		}
		rows[i] = []string{strconv.Itoa(l.Partition), holder, orDash(l.ClaimedAt), orDash(l.ExpiresAt), relativeTo(l.ExpiresAt, r.Now), takeOver}
		for _, p := range l.Problems {
			problems = append(problems, plain(l.Key)+": "+plain(p))
		}
	}
	fmt.Fprintf(w, "\npartitions: %d, %d held\n", len(r.Partitions), held)
	if len(r.Partitions) > 0 {
		header := []string{"PARTITION", "HOLDER", "CLAIMED AT", "EXPIRES AT", "REMAINING", "TAKE-OVER"}
		if err := table(w, "  ", header, rows); err != nil {
			return err
		}
	}
	for _, p := range problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	_, err := fmt.Fprint(w, `
HOLDER: the member whose claim took the lease; "a relay (unnamed)" for a relay of an earlier version.
TAKE-OVER: yes where the lease's claim took over a lapsed one (another relay's, or the holder's own).
`)
	return err
}
