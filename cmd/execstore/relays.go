package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"

	"github.com/execstore/execstore/internal/leases"
)

// The relays' keys and fingerprints in their lease store are package leases' layout.
const (
	relayLeaseKey   = leases.RelayKey   // a Relay's Options.LeaseKey by default
	sweeperLeaseKey = leases.SweeperKey // a Sweeper's
)

// idemPrevState is the state a claim took the record over from, which idem's MongoDB
// formulation records (idem/record.go): CLAIMED when the claim took over a lapsed lease.
const idemPrevState = "prev_state"

// relaysOptions name the relays `relays` prints.
type relaysOptions struct {
	output
	Collection string
	LeaseKey   string
}

// relaysReport is the relays of a lease key: the members registered and the partitions'
// leases, judged by the server's clock.
type relaysReport struct {
	LeaseKey   string           `json:"lease_key"`
	Now        string           `json:"now"`
	Clock      string           `json:"clock"` // "server" ($$NOW or hello's localTime), or "local"
	Members    []relayMember    `json:"members"`
	Partitions []partitionLease `json:"partitions"`
}

// relayMember is one relay registered under the lease key: its member lease.
type relayMember struct {
	Name string `json:"name"`
	Key  string `json:"key"`
	// Partitions is the number of partitions the relay divides the store into, as its
	// registration names it; absent when it names none (a relay of an earlier version).
	Partitions       *int    `json:"partitions,omitempty"`
	RegisteredAt     string  `json:"registered_at,omitempty"` // when the member lease was claimed
	ExpiresAt        string  `json:"expires_at,omitempty"`    // the lease's end, by the server's clock
	RemainingSeconds float64 `json:"remaining_seconds"`       // until ExpiresAt; negative once lapsed
	// Lapsed: the relay did not renew its registration in time; the other relays leave it
	// out of the share.
	Lapsed   bool     `json:"lapsed"`
	Problems []string `json:"problems"`
}

// partitionLease is the lease of one partition, or its absence.
type partitionLease struct {
	Partition int    `json:"partition"`
	Key       string `json:"key"`
	// Held: a relay holds the partition under a live lease. The lease does not name the
	// relay: it records a claim token, never shown, which no member's record shares.
	Held bool `json:"held"`
	// Lapsed: the lease's end has passed; nobody holds the partition until the next claim.
	// Neither Held nor Lapsed: there is no lease (never claimed, or released).
	Lapsed           bool     `json:"lapsed"`
	ClaimedAt        string   `json:"claimed_at,omitempty"`
	ExpiresAt        string   `json:"expires_at,omitempty"`
	RemainingSeconds *float64 `json:"remaining_seconds,omitempty"` // absent without a lease
	// TakenOver: the lease's claim took it over from a claim whose lease had lapsed (another
	// relay's, or the holder's own), as idem's MongoDB formulation records it; its FerretDB
	// formulation records no such thing, and then it is false.
	TakenOver bool     `json:"taken_over"`
	Problems  []string `json:"problems"`
}

// listRelays prints the relays sharing the lease key's partitions: the server's clock, then
// one find of the lease key's records on the _id index. The claim tokens are left out of the
// read.
func listRelays(ctx context.Context, db *mongo.Database, w io.Writer, o relaysOptions) error {
	now, clock := serverNow(ctx, db, o.Now)
	coll := db.Collection(o.Collection)
	cur, err := coll.Find(ctx, bson.D{{Key: idField, Value: prefixRange(o.LeaseKey)}}, options.Find().
		SetProjection(bson.D{{Key: idemToken, Value: 0}, {Key: idemHeaders, Value: 0}, {Key: idemBody, Value: 0}}).
		SetSort(bson.D{{Key: idField, Value: 1}}))
	if err != nil {
		return fmt.Errorf("reading the leases of %q in %s.%s: %w", o.LeaseKey, db.Name(), coll.Name(), err)
	}
	defer cur.Close(context.WithoutCancel(ctx))
	r := &relaysReport{LeaseKey: o.LeaseKey, Now: formatTime(now), Clock: clock, Members: []relayMember{}, Partitions: []partitionLease{}}
	for cur.Next(ctx) {
		key, _ := cur.Current.Lookup(idField).StringValueOK()
		if name, ok := strings.CutPrefix(key, leases.MembersPrefix(o.LeaseKey)); ok && name != "" {
			r.Members = append(r.Members, readMember(cur.Current, key, name, now))
		} else if p, ok := partitionOf(key, o.LeaseKey); ok {
			r.Partitions = append(r.Partitions, readPartitionLease(cur.Current, key, p, now))
		}
	}
	if err := cur.Err(); err != nil {
		return fmt.Errorf("reading the leases of %q in %s.%s: %w", o.LeaseKey, db.Name(), coll.Name(), err)
	}
	r.Partitions = withUnheld(r.Partitions, r.Members, o.LeaseKey)
	return emit(w, o.output, r)
}

// partitionOf is the partition whose lease key is key: p for LeaseKey/partitions/<p>, 0 for
// the one lease of a store that is not partitioned.
func partitionOf(key, leaseKey string) (int, bool) {
	if key == leaseKey {
		return 0, true
	}
	return leases.PartitionOfKey(leaseKey, key)
}

// partitionKey is the lease key of partition p of a store of n partitions.
func partitionKey(leaseKey string, p, n int) string {
	if n <= 1 {
		return leaseKey
	}
	return leases.PartitionKey(leaseKey, p)
}

// readMember reads the member lease of the relay name.
func readMember(doc bson.Raw, key, name string, now time.Time) relayMember {
	rec := readIdem(doc, key, now, "", false)
	m := relayMember{Name: name, Key: key, RegisteredAt: rec.ClaimedAt, ExpiresAt: rec.Until, Lapsed: rec.Lapsed,
		Problems: leaseProblems(rec)}
	if parts, ok := leases.PartitionsOfMember(rec.Fingerprint); ok {
		m.Partitions = &parts
	}
	if until, err := time.Parse(time.RFC3339Nano, rec.Until); err == nil {
		m.RemainingSeconds = seconds(until.Sub(now))
	}
	return m
}

// readPartitionLease reads the lease of partition p.
func readPartitionLease(doc bson.Raw, key string, p int, now time.Time) partitionLease {
	rec := readIdem(doc, key, now, "", false)
	l := partitionLease{Partition: p, Key: key, Lapsed: rec.Lapsed, ClaimedAt: rec.ClaimedAt, ExpiresAt: rec.Until,
		Problems: leaseProblems(rec)}
	if rec.Fingerprint != "" && rec.Fingerprint != leases.Fingerprint {
		l.Problems = append(l.Problems, fmt.Sprintf("%s: %q is not a relay's", idemFingerprint, rec.Fingerprint))
	}
	l.Held = !l.Lapsed && len(l.Problems) == 0
	if until, err := time.Parse(time.RFC3339Nano, rec.Until); err == nil {
		s := seconds(until.Sub(now))
		l.RemainingSeconds = &s
	}
	prev, _ := doc.Lookup(idemPrevState).StringValueOK()
	l.TakenOver = prev == idemClaimed
	return l
}

// leaseProblems are what makes rec no relay's lease: the fields idem cannot read (it takes
// such a record as absent, and the next claim takes it over), or a completed record.
func leaseProblems(rec *idemReport) []string {
	problems := rec.Problems
	if rec.State == idemCompleted {
		problems = append(problems, idemState+": "+idemCompleted+", not a lease")
	}
	return problems
}

// withUnheld adds to leases the partitions the members divide the store into that have no
// lease, and sorts them by partition. The number of partitions is the largest a live member
// names, or any member when none is live.
func withUnheld(leases []partitionLease, members []relayMember, leaseKey string) []partitionLease {
	n := 0
	for _, live := range []bool{true, false} {
		for _, m := range members {
			if m.Partitions != nil && m.Lapsed != live {
				n = max(n, *m.Partitions)
			}
		}
		if n > 0 {
			break
		}
	}
	for p := range n {
		key := partitionKey(leaseKey, p, n)
		if !slices.ContainsFunc(leases, func(l partitionLease) bool { return l.Key == key }) {
			leases = append(leases, partitionLease{Partition: p, Key: key, Problems: []string{}})
		}
	}
	slices.SortFunc(leases, func(a, b partitionLease) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), strings.Compare(a.Key, b.Key))
	})
	return leases
}

func (r *relaysReport) writeText(w io.Writer) error {
	fmt.Fprintf(w, "relays of lease key %s (now %s, %s clock)\n\n", plain(r.LeaseKey), r.Now, r.Clock)
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
			parts := "-"
			if m.Partitions != nil {
				parts = strconv.Itoa(*m.Partitions)
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
		if err := table(w, "  ", []string{"MEMBER", "PARTITIONS", "REGISTERED AT", "EXPIRES AT", "REMAINING"}, rows); err != nil {
			return err
		}
	}
	held := 0
	rows := make([][]string, len(r.Partitions))
	for i, l := range r.Partitions {
		holder := "nobody"
		switch {
		case l.Held:
			holder = "a relay"
			held++
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
A lease names no holder: it records a claim token (never shown), not the relay's name.
TAKE-OVER: yes where the lease's claim took over a lapsed one (idem records it on MongoDB only).
`)
	return err
}
